/**
 * TPM 2.0 constants (TCG TPM 2.0 Library, Part 2: Structures) used by our client and verifiers.
 * Only what this project sends or parses; names follow the specification without the TPM_ prefix noise.
 */

/** TPM_ALG_ID values. */
export const TPM_ALG = {
  RSA: 0x0001,
  SHA1: 0x0004,
  HMAC: 0x0005,
  AES: 0x0006,
  KEYEDHASH: 0x0008,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  RSASSA: 0x0014,
  RSAES: 0x0015,
  RSAPSS: 0x0016,
  OAEP: 0x0017,
  ECDSA: 0x0018,
  ECDH: 0x0019,
  ECDAA: 0x001a,
  ECSCHNORR: 0x001c,
  ECC: 0x0023,
  SYMCIPHER: 0x0025,
  CFB: 0x0043,
} as const;

export const TPM_ALG_SHA1 = TPM_ALG.SHA1;
export const TPM_ALG_SHA256 = TPM_ALG.SHA256;
export const TPM_ALG_SHA384 = TPM_ALG.SHA384;
export const TPM_ALG_SHA512 = TPM_ALG.SHA512;

/** Hash algorithms by TPM id: Node's name and the digest size. */
export const HASH_ALGS: ReadonlyMap<number, { name: string; size: number }> = new Map([
  [TPM_ALG.SHA1, { name: 'sha1', size: 20 }],
  [TPM_ALG.SHA256, { name: 'sha256', size: 32 }],
  [TPM_ALG.SHA384, { name: 'sha384', size: 48 }],
  [TPM_ALG.SHA512, { name: 'sha512', size: 64 }],
]);

/** TPM_ECC_CURVE values with Node/JWK names and coordinate sizes. */
export const TPM_ECC = { NIST_P256: 0x0003, NIST_P384: 0x0004, NIST_P521: 0x0005 } as const;
export const ECC_CURVES: ReadonlyMap<number, { jwk: string; size: number }> = new Map([
  [TPM_ECC.NIST_P256, { jwk: 'P-256', size: 32 }],
  [TPM_ECC.NIST_P384, { jwk: 'P-384', size: 48 }],
  [TPM_ECC.NIST_P521, { jwk: 'P-521', size: 66 }],
]);

/** TPM_ST structure tags. */
export const TPM_ST = {
  NO_SESSIONS: 0x8001,
  SESSIONS: 0x8002,
  ATTEST_QUOTE: 0x8018,
} as const;

/** TPM_CC command codes. */
export const TPM_CC = {
  EvictControl: 0x00000120,
  NV_UndefineSpace: 0x00000122,
  NV_DefineSpace: 0x0000012a,
  PCR_Allocate: 0x0000012b,
  CreatePrimary: 0x00000131,
  NV_Write: 0x00000137,
  NV_Read: 0x0000014e,
  NV_ReadPublic: 0x00000169,
  PCR_Event: 0x0000013c,
  Startup: 0x00000144,
  Shutdown: 0x00000145,
  Quote: 0x00000158,
  FlushContext: 0x00000165,
  ReadPublic: 0x00000173,
  GetCapability: 0x0000017a,
  PCR_Read: 0x0000017e,
  PCR_Extend: 0x00000182,
} as const;

/** TPM_SU startup types. */
export const TPM_SU = { CLEAR: 0x0000, STATE: 0x0001 } as const;

/** Permanent handles. */
export const TPM_RH = {
  OWNER: 0x40000001,
  NULL: 0x40000007,
  PW: 0x40000009, // TPM_RS_PW: the password authorization session
  ENDORSEMENT: 0x4000000b,
  PLATFORM: 0x4000000c,
} as const;

/** First handle of each handle range (TPM_HT in the top byte). */
export const TPM_HR = {
  PCR: 0x00000000,
  HMAC_SESSION: 0x02000000,
  POLICY_SESSION: 0x03000000,
  NV_INDEX: 0x01000000,
  TRANSIENT: 0x80000000,
  PERSISTENT: 0x81000000,
} as const;

/** TPMA_NV bits (who may read or write an NV index). */
export const TPMA_NV = {
  PPWRITE: 1 << 0,
  OWNERWRITE: 1 << 1,
  AUTHWRITE: 1 << 2,
  PPREAD: 1 << 16,
  OWNERREAD: 1 << 17,
  AUTHREAD: 1 << 18,
  NO_DA: 1 << 25,
} as const;

/** TPM_CAP capability groups. */
export const TPM_CAP = {
  ALGS: 0x00000000,
  HANDLES: 0x00000001,
  COMMANDS: 0x00000002,
  PCRS: 0x00000005,
  TPM_PROPERTIES: 0x00000006,
} as const;

/** TPM_PT properties we read. */
export const TPM_PT = {
  FAMILY_INDICATOR: 0x00000100,
  MANUFACTURER: 0x00000105,
  PCR_COUNT: 0x00000112,
} as const;

/** TPMA_OBJECT bits. */
export const TPMA_OBJECT = {
  fixedTPM: 1 << 1,
  stClear: 1 << 2,
  fixedParent: 1 << 4,
  sensitiveDataOrigin: 1 << 5,
  userWithAuth: 1 << 6,
  adminWithPolicy: 1 << 7,
  noDA: 1 << 10,
  encryptedDuplication: 1 << 11,
  restricted: 1 << 16,
  decrypt: 1 << 17,
  sign: 1 << 18,
} as const;

/** TPM_RC values we react to. */
export const TPM_RC = {
  SUCCESS: 0x000,
  INITIALIZE: 0x100,
} as const;

/** TPM_GENERATED_VALUE: the magic in every TPMS_ATTEST the TPM signs ("\xffTCG"). */
export const TPM_GENERATED_VALUE = 0xff544347;

/** Implementation limits that bound parsing (a hostile structure cannot make us allocate much). */
export const PCR_COUNT = 24;
export const PCR_SELECT_MAX = 8; // PCRs per PCR_Read answer (TPML_DIGEST holds at most 8)
export const MAX_EVENT_DATA = 1024;

export function hashAlgInfo(alg: number): { name: string; size: number } | undefined {
  return HASH_ALGS.get(alg);
}

export function hashAlgName(alg: number): string {
  return HASH_ALGS.get(alg)?.name ?? `0x${alg.toString(16).padStart(4, '0')}`;
}
