/**
 * TDX quotes made in the test: a test root CA standing in for Intel's SGX Root CA, a PCK CA and PCK
 * certificate, an attestation key, and a v4 quote with its QE report, all signed for real.
 */
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { makeCert } from '../snp/test-ca.js';

export interface TdxTestCa {
  rootPem: string;
  pckChain: string;
  pckKey: KeyObject;
}

const ec = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });

export function makeTdxTestCa(): TdxTestCa {
  const root = ec();
  const inter = ec();
  const pck = ec();
  const rootCert = makeCert({
    subject: 'Test SGX Root CA',
    issuer: 'Test SGX Root CA',
    publicKey: root.publicKey,
    signingKey: root.privateKey,
    signature: 'ecdsa-sha256',
    ca: true,
  });
  const interCert = makeCert({
    subject: 'Test SGX PCK Platform CA',
    issuer: 'Test SGX Root CA',
    publicKey: inter.publicKey,
    signingKey: root.privateKey,
    signature: 'ecdsa-sha256',
    ca: true,
  });
  const pckCert = makeCert({
    subject: 'Test SGX PCK Certificate',
    issuer: 'Test SGX PCK Platform CA',
    publicKey: pck.publicKey,
    signingKey: inter.privateKey,
    signature: 'ecdsa-sha256',
  });
  return { rootPem: rootCert.pem, pckChain: pckCert.pem + interCert.pem + rootCert.pem, pckKey: pck.privateKey };
}

export interface QuoteFields {
  qeSvn?: number;
  pceSvn?: number;
  teeTcbSvn?: Uint8Array;
  mrSeam?: Uint8Array;
  tdAttributes?: Uint8Array;
  reportData?: Uint8Array;
  /** Break the QE report's binding of the attestation key. */
  unboundQeReport?: boolean;
  pckChain?: string;
}

const u16 = (v: number) => Buffer.from([v & 0xff, v >> 8]);
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
};

/** A TDX quote v4 signed by a fresh attestation key whose QE report is signed by the CA's PCK key. */
export function makeTdxQuote(ca: TdxTestCa, fields: QuoteFields = {}): Uint8Array {
  const header = Buffer.concat([
    u16(4),
    u16(2),
    u32(0x81),
    u16(fields.qeSvn ?? 8),
    u16(fields.pceSvn ?? 13),
    Buffer.alloc(16, 0x93),
    Buffer.alloc(20),
  ]);
  const body = Buffer.alloc(0x248);
  body.set(fields.teeTcbSvn ?? Buffer.from('03000500000000000000000000000000', 'hex'), 0x00);
  body.set(fields.mrSeam ?? Buffer.alloc(48, 0x5e), 0x10);
  body.set(fields.tdAttributes ?? Buffer.alloc(8), 0x78);
  body.set(Buffer.alloc(48, 0x7d), 0x88);
  if (fields.reportData) body.set(fields.reportData, 0x208);
  const signed = Buffer.concat([header, body]);

  const ak = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = ak.publicKey.export({ format: 'jwk' });
  const akPoint = Buffer.concat([Buffer.from(jwk.x as string, 'base64url'), Buffer.from(jwk.y as string, 'base64url')]);
  const signature = sign('sha256', signed, { key: ak.privateKey, dsaEncoding: 'ieee-p1363' });

  const authData = Buffer.from('qe auth data for the test');
  const qeReport = Buffer.alloc(0x180);
  qeReport.writeUInt16LE(2, 0x100); // ISVPRODID of the TD QE
  const binding = createHash('sha256').update(akPoint).update(authData).digest();
  if (fields.unboundQeReport) binding[0] ^= 1;
  qeReport.set(binding, 0x140);
  const qeSignature = sign('sha256', qeReport, { key: ca.pckKey, dsaEncoding: 'ieee-p1363' });
  const chain = Buffer.from(fields.pckChain ?? ca.pckChain);
  const pckData = Buffer.concat([u16(5), u32(chain.length), chain]);
  const certData = Buffer.concat([qeReport, qeSignature, u16(authData.length), authData, pckData]);
  const signedData = Buffer.concat([signature, akPoint, u16(6), u32(certData.length), certData]);
  return new Uint8Array(Buffer.concat([signed, u32(signedData.length), signedData]));
}
