/**
 * SEV-SNP evidence made in the test: a test ARK/ASK/ASVK standing in for AMD's, VCEK/VLEK certificates with
 * AMD's extensions, and reports signed with their keys. Used by the SNP tests and the SNP variants' tests.
 */
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import type { AmdRoots } from '../../../lib/attestation/snp/certs.js';
import type { SnpProduct, SnpSigningKey, TcbVersion } from '../../../lib/attestation/snp/report.js';
import { ia5, int, makeCert, type TestCert } from './test-ca.js';

export interface SnpTestCa {
  product: SnpProduct;
  roots: AmdRoots;
  ark: TestCert;
  ask: TestCert;
  asvk: TestCert;
  askKey: KeyObject;
  asvkKey: KeyObject;
  /** ASK then ARK / ASVK then ARK, PEM. */
  vcekChain: string;
  vlekChain: string;
}

// RSA key generation dominates the time of these tests: every test CA in a process shares one set of keys
// (its certificates still differ, and trust is pinned to the ARK certificate's bytes).
type RsaPair = { publicKey: KeyObject; privateKey: KeyObject };
let shared: RsaPair[] | undefined;
function rsaPairs(): RsaPair[] {
  shared ??= [0, 1, 2].map(() => generateKeyPairSync('rsa', { modulusLength: 2048 }));
  return shared;
}

export function makeSnpTestCa(product: SnpProduct = 'Milan'): SnpTestCa {
  const [arkKeys, askKeys, asvkKeys] = rsaPairs();
  const ark = makeCert({
    subject: `ARK-${product}`,
    issuer: `ARK-${product}`,
    publicKey: arkKeys.publicKey,
    signingKey: arkKeys.privateKey,
    signature: 'rsa-pss-sha384',
    ca: true,
  });
  const ask = makeCert({
    subject: `SEV-${product}`,
    issuer: `ARK-${product}`,
    publicKey: askKeys.publicKey,
    signingKey: arkKeys.privateKey,
    signature: 'rsa-pss-sha384',
    ca: true,
  });
  const asvk = makeCert({
    subject: `SEV-VLEK-${product}`,
    issuer: `ARK-${product}`,
    publicKey: asvkKeys.publicKey,
    signingKey: arkKeys.privateKey,
    signature: 'rsa-pss-sha384',
    ca: true,
  });
  const vcekChain = ask.pem + ark.pem;
  const vlekChain = asvk.pem + ark.pem;
  return {
    product,
    roots: { [product]: { vcek: vcekChain, vlek: vlekChain } },
    ark,
    ask,
    asvk,
    askKey: askKeys.privateKey,
    asvkKey: asvkKeys.privateKey,
    vcekChain,
    vlekChain,
  };
}

export const DEFAULT_TCB: TcbVersion = { bootloader: 3, tee: 0, snp: 8, microcode: 115 };

export interface EndorsementKey {
  cert: TestCert;
  privateKey: KeyObject;
  chipId: Uint8Array;
  tcb: TcbVersion;
}

/** A VCEK (or VLEK) for a chip at a TCB, issued by the test ASK (or ASVK). */
export function makeEndorsementKey(
  ca: SnpTestCa,
  options: {
    kind?: SnpSigningKey;
    tcb?: TcbVersion;
    chipId?: Uint8Array;
    notAfter?: Date;
    productName?: string;
    issuerKey?: KeyObject;
  } = {},
): EndorsementKey {
  const kind = options.kind ?? 'vcek';
  const tcb = options.tcb ?? DEFAULT_TCB;
  const chipId = options.chipId ?? Uint8Array.from({ length: 64 }, (_, i) => (i * 7 + 1) & 0xff);
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const ext = (suffix: string, value: Uint8Array) => ({ oid: `1.3.6.1.4.1.3704.1.${suffix}`, value });
  const extensions = [
    ext('1', int(1)),
    ext('2', ia5(options.productName ?? (ca.product === 'Turin' ? 'Turin' : `${ca.product}-B0`))),
    ext('3.1', int(tcb.bootloader)),
    ext('3.2', int(tcb.tee)),
    ext('3.3', int(tcb.snp)),
    ext('3.8', int(tcb.microcode)),
    ...(tcb.fmc !== undefined ? [ext('3.9', int(tcb.fmc))] : []),
    ...(kind === 'vcek'
      ? [ext('4', ca.product === 'Turin' ? chipId.subarray(0, 8) : chipId)]
      : [ext('5', ia5('Amazon Web Services'))]),
  ];
  const cert = makeCert({
    subject: kind === 'vcek' ? 'SEV-VCEK' : 'SEV-VLEK',
    issuer: kind === 'vcek' ? `SEV-${ca.product}` : `SEV-VLEK-${ca.product}`,
    publicKey: keys.publicKey,
    signingKey: options.issuerKey ?? (kind === 'vcek' ? ca.askKey : ca.asvkKey),
    signature: 'rsa-pss-sha384',
    notBefore: new Date('2023-01-01T00:00:00Z'),
    notAfter: options.notAfter ?? new Date('2030-01-01T00:00:00Z'),
    extensions,
  });
  return { cert, privateKey: keys.privateKey, chipId, tcb };
}

export interface ReportFields {
  version?: number;
  vmpl?: number;
  policy?: bigint;
  signingKey?: SnpSigningKey;
  reportData?: Uint8Array;
  measurement?: Uint8Array;
  reportedTcb?: TcbVersion;
  launchTcb?: TcbVersion;
  chipId?: Uint8Array;
  cpuid?: { family: number; model: number; stepping: number };
}

export function encodeTcb(tcb: TcbVersion, product: SnpProduct): bigint {
  const b = new Uint8Array(8);
  if (product === 'Turin') {
    b[0] = tcb.fmc ?? 0;
    b[1] = tcb.bootloader;
    b[2] = tcb.tee;
    b[3] = tcb.snp;
  } else {
    b[0] = tcb.bootloader;
    b[1] = tcb.tee;
    b[6] = tcb.snp;
  }
  b[7] = tcb.microcode;
  return Buffer.from(b).readBigUInt64LE();
}

/** An SNP report with the given fields (defaults: a valid report for `key`'s chip and TCB), signed by `key`. */
export function makeSnpReport(fields: ReportFields, key: EndorsementKey, product: SnpProduct = 'Milan'): Uint8Array {
  const r = Buffer.alloc(0x4a0);
  r.writeUInt32LE(fields.version ?? 2, 0x00);
  r.writeBigUInt64LE(fields.policy ?? 0x30000n, 0x08);
  r.writeUInt32LE(fields.vmpl ?? 0, 0x30);
  r.writeUInt32LE(1, 0x34);
  const tcb = encodeTcb(fields.reportedTcb ?? key.tcb, product);
  r.writeBigUInt64LE(tcb, 0x38);
  r.writeUInt32LE((fields.signingKey ?? 'vcek') === 'vcek' ? 0 : 1 << 2, 0x48);
  if (fields.reportData) r.set(fields.reportData, 0x50);
  r.set(fields.measurement ?? Buffer.alloc(48, 0xab), 0x90);
  r.writeBigUInt64LE(tcb, 0x180);
  if (fields.cpuid) {
    r[0x188] = fields.cpuid.family;
    r[0x189] = fields.cpuid.model;
    r[0x18a] = fields.cpuid.stepping;
  }
  r.set(fields.chipId ?? key.chipId, 0x1a0);
  r.writeBigUInt64LE(tcb, 0x1e0);
  r.writeBigUInt64LE(fields.launchTcb ? encodeTcb(fields.launchTcb, product) : tcb, 0x1f0);
  const sig = sign('sha384', r.subarray(0, 0x2a0), { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
  r.set(Buffer.from(sig.subarray(0, 48)).reverse(), 0x2a0);
  r.set(Buffer.from(sig.subarray(48)).reverse(), 0x2e8);
  return new Uint8Array(r);
}
