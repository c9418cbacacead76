/**
 * The AMD SEV-SNP attestation report (SEV-SNP ABI spec 56860, table "ATTESTATION_REPORT"): 1184 bytes,
 * little-endian, signed over bytes 0x000–0x29F with ECDSA P-384 / SHA-384 by the chip's VCEK or a VLEK.
 * Parsing only; the checks live in verify.ts. Report versions 2 to 5 are read (3 added the CPUID fields,
 * 5 the mitigation vectors); newer layouts are refused rather than guessed.
 */
import { AttestationError } from '../types.js';

export const SNP_REPORT_SIZE = 0x4a0;
/** The signed part of the report: everything before the signature. */
export const SNP_SIGNED_SIZE = 0x2a0;

export type SnpProduct = 'Milan' | 'Genoa' | 'Turin';
export const SNP_PRODUCTS: readonly SnpProduct[] = ['Milan', 'Genoa', 'Turin'];

export type SnpSigningKey = 'vcek' | 'vlek';

/** A TCB version: the security patch levels of the firmware components (Turin adds the FMC). */
export interface TcbVersion {
  bootloader: number;
  tee: number;
  snp: number;
  microcode: number;
  fmc?: number;
}

export interface SnpPolicy {
  abiMinor: number;
  abiMajor: number;
  smt: boolean;
  migrateMa: boolean;
  debug: boolean;
  singleSocket: boolean;
}

export interface SnpReport {
  version: number;
  guestSvn: number;
  /** The raw guest policy; `policyFlags` is its reading. */
  policy: bigint;
  policyFlags: SnpPolicy;
  familyId: Uint8Array;
  imageId: Uint8Array;
  vmpl: number;
  signatureAlgo: number;
  currentTcb: TcbVersion;
  platformInfo: bigint;
  signingKey: SnpSigningKey;
  maskChipId: boolean;
  authorKeyEnabled: boolean;
  reportData: Uint8Array;
  measurement: Uint8Array;
  hostData: Uint8Array;
  idKeyDigest: Uint8Array;
  authorKeyDigest: Uint8Array;
  reportId: Uint8Array;
  reportIdMa: Uint8Array;
  reportedTcb: TcbVersion;
  /** CPUID family/model/stepping of the chip (report version 3 and later). */
  cpuid?: { family: number; model: number; stepping: number };
  chipId: Uint8Array;
  committedTcb: TcbVersion;
  currentVersion: { major: number; minor: number; build: number };
  committedVersion: { major: number; minor: number; build: number };
  launchTcb: TcbVersion;
  /** The product whose TCB layout was used to read the TCB fields. */
  product: SnpProduct;
  /** ECDSA P-384 signature as big-endian r and s (48 bytes each). */
  signature: { r: Uint8Array; s: Uint8Array };
  /** The 1184 report bytes. */
  raw: Uint8Array;
}

/** Why a report could not even be read. */
export class SnpFormatError extends AttestationError {}

const POLICY_DEBUG_BIT = 19n;

/** Reads a TCB_VERSION word; Turin moved the fields and added the FMC (ABI spec rev 1.57+). */
export function decodeTcb(raw: bigint, product: SnpProduct): TcbVersion {
  const byte = (i: number) => Number((raw >> BigInt(8 * i)) & 0xffn);
  if (product === 'Turin') return { fmc: byte(0), bootloader: byte(1), tee: byte(2), snp: byte(3), microcode: byte(7) };
  return { bootloader: byte(0), tee: byte(1), snp: byte(6), microcode: byte(7) };
}

/** The product a report's CPUID fields name (version 3+); undefined for older reports or unknown chips. */
export function productFromCpuid(cpuid: { family: number; model: number } | undefined): SnpProduct | undefined {
  if (!cpuid) return undefined;
  if (cpuid.family === 0x19 && cpuid.model >> 4 === 0) return 'Milan';
  if (cpuid.family === 0x19 && cpuid.model >> 4 === 1) return 'Genoa';
  if (cpuid.family === 0x1a) return 'Turin';
  return undefined;
}

/** Converts one of the report's 72-byte little-endian signature integers to 48 big-endian bytes. */
function signatureComponent(le: Uint8Array): Uint8Array {
  for (let i = 48; i < 72; i++)
    if (le[i] !== 0) throw new SnpFormatError('SEV-SNP report signature component is larger than a P-384 integer');
  return Uint8Array.from(le.subarray(0, 48)).reverse();
}

/**
 * Parses a report. `bytes` may be longer than 1184 bytes (Azure's paravisor appends its own header);
 * only the first 1184 are read. `product` picks the TCB layout when the report itself does not name its chip.
 */
export function parseSnpReport(bytes: Uint8Array, product?: SnpProduct): SnpReport {
  if (bytes.length < SNP_REPORT_SIZE) {
    throw new SnpFormatError(`SEV-SNP report is ${bytes.length} bytes; a report has ${SNP_REPORT_SIZE} bytes`);
  }
  const raw = bytes.subarray(0, SNP_REPORT_SIZE);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const u32 = (o: number) => view.getUint32(o, true);
  const u64 = (o: number) => view.getBigUint64(o, true);
  const slice = (from: number, to: number) => raw.slice(from, to);

  const version = u32(0x00);
  if (version < 2 || version > 5)
    throw new SnpFormatError(`SEV-SNP report version ${version} is not supported (2 to 5 are)`);
  const signatureAlgo = u32(0x34);
  if (signatureAlgo !== 1)
    throw new SnpFormatError(`SEV-SNP report signature algorithm ${signatureAlgo} is not ECDSA P-384 with SHA-384 (1)`);
  const signerInfo = u32(0x48);
  const keyField = (signerInfo >> 2) & 7;
  if (keyField !== 0 && keyField !== 1) {
    throw new SnpFormatError(
      keyField === 7
        ? 'SEV-SNP report is not signed (SIGNING_KEY = none)'
        : `SEV-SNP report names a reserved signing key (${keyField})`,
    );
  }

  const cpuid =
    version >= 3 && (raw[0x188] | raw[0x189] | raw[0x18a]) !== 0
      ? { family: raw[0x188], model: raw[0x189], stepping: raw[0x18a] }
      : undefined;
  const layout = productFromCpuid(cpuid) ?? product ?? 'Milan';
  const policy = u64(0x08);
  return {
    version,
    guestSvn: u32(0x04),
    policy,
    policyFlags: {
      abiMinor: Number(policy & 0xffn),
      abiMajor: Number((policy >> 8n) & 0xffn),
      smt: ((policy >> 16n) & 1n) === 1n,
      migrateMa: ((policy >> 18n) & 1n) === 1n,
      debug: ((policy >> POLICY_DEBUG_BIT) & 1n) === 1n,
      singleSocket: ((policy >> 20n) & 1n) === 1n,
    },
    familyId: slice(0x10, 0x20),
    imageId: slice(0x20, 0x30),
    vmpl: u32(0x30),
    signatureAlgo,
    currentTcb: decodeTcb(u64(0x38), layout),
    platformInfo: u64(0x40),
    signingKey: keyField === 0 ? 'vcek' : 'vlek',
    maskChipId: (signerInfo & 2) !== 0,
    authorKeyEnabled: (signerInfo & 1) !== 0,
    reportData: slice(0x50, 0x90),
    measurement: slice(0x90, 0xc0),
    hostData: slice(0xc0, 0xe0),
    idKeyDigest: slice(0xe0, 0x110),
    authorKeyDigest: slice(0x110, 0x140),
    reportId: slice(0x140, 0x160),
    reportIdMa: slice(0x160, 0x180),
    reportedTcb: decodeTcb(u64(0x180), layout),
    cpuid,
    chipId: slice(0x1a0, 0x1e0),
    committedTcb: decodeTcb(u64(0x1e0), layout),
    currentVersion: { build: raw[0x1e8], minor: raw[0x1e9], major: raw[0x1ea] },
    committedVersion: { build: raw[0x1ec], minor: raw[0x1ed], major: raw[0x1ee] },
    launchTcb: decodeTcb(u64(0x1f0), layout),
    product: layout,
    signature: { r: signatureComponent(raw.subarray(0x2a0, 0x2e8)), s: signatureComponent(raw.subarray(0x2e8, 0x330)) },
    raw: Uint8Array.from(raw),
  };
}

export function formatTcb(tcb: TcbVersion): string {
  const fmc = tcb.fmc === undefined ? '' : `FMC ${tcb.fmc}, `;
  return `${fmc}bootloader ${tcb.bootloader}, TEE ${tcb.tee}, SNP ${tcb.snp}, microcode ${tcb.microcode}`;
}
