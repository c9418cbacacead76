/**
 * TPM 2.0 structures we exchange with TPMs and verify remotely: TPML_PCR_SELECTION, TPMT_PUBLIC (RSA, ECC),
 * TPMT_SIGNATURE, TPMS_ATTEST; plus turning a TPMT_PUBLIC into a Node KeyObject and computing a TPM name.
 * Parsers are strict (unknown algorithms and trailing bytes are errors): their input is remote evidence.
 */
import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { ECC_CURVES, hashAlgInfo, hashAlgName, PCR_COUNT, TPM_ALG, TPM_GENERATED_VALUE, TPM_ST } from './constants.js';
import { TpmFormatError, TpmReader, TpmWriter } from './marshal.js';

// ---------------------------------------------------------------- TPML_PCR_SELECTION

export interface PcrSelection {
  hashAlg: number;
  /** PCR indices, ascending. */
  pcrs: number[];
}

export function writePcrSelections(w: TpmWriter, selections: PcrSelection[]): void {
  w.u32(selections.length);
  for (const { hashAlg, pcrs } of selections) {
    const bitmap = new Uint8Array(3); // sizeofSelect 3: PCRs 0-23
    for (const i of pcrs) {
      if (!Number.isInteger(i) || i < 0 || i >= PCR_COUNT) throw new TpmFormatError(`PCR index out of range: ${i}`);
      bitmap[i >> 3] |= 1 << (i & 7);
    }
    w.u16(hashAlg).u8(bitmap.length).bytes(bitmap);
  }
}

export function readPcrSelections(r: TpmReader): PcrSelection[] {
  const count = r.u32();
  if (count > 16) throw new TpmFormatError(`TPML_PCR_SELECTION has ${count} entries`);
  const out: PcrSelection[] = [];
  for (let n = 0; n < count; n++) {
    const hashAlg = r.u16();
    const sizeofSelect = r.u8();
    if (sizeofSelect > 4) throw new TpmFormatError(`TPMS_PCR_SELECTION sizeofSelect ${sizeofSelect} is too large`);
    const bitmap = r.bytes(sizeofSelect);
    const pcrs: number[] = [];
    for (let i = 0; i < sizeofSelect * 8; i++) if (bitmap[i >> 3] & (1 << (i & 7))) pcrs.push(i);
    out.push({ hashAlg, pcrs });
  }
  return out;
}

// ---------------------------------------------------------------- TPMT_PUBLIC

export interface TpmSymDef {
  algorithm: number;
  keyBits?: number;
  mode?: number;
}

export interface TpmScheme {
  scheme: number;
  hashAlg?: number;
  /** ECDAA only. */
  count?: number;
}

export interface TpmRsaParams {
  symmetric: TpmSymDef;
  scheme: TpmScheme;
  keyBits: number;
  /** 0 means the default 65537. */
  exponent: number;
}

export interface TpmEccParams {
  symmetric: TpmSymDef;
  scheme: TpmScheme;
  curveId: number;
  kdf: TpmScheme;
}

export interface TpmRsaPublic {
  type: typeof TPM_ALG.RSA;
  nameAlg: number;
  objectAttributes: number;
  authPolicy: Uint8Array;
  parameters: TpmRsaParams;
  unique: { n: Uint8Array };
}

export interface TpmEccPublic {
  type: typeof TPM_ALG.ECC;
  nameAlg: number;
  objectAttributes: number;
  authPolicy: Uint8Array;
  parameters: TpmEccParams;
  unique: { x: Uint8Array; y: Uint8Array };
}

export type TpmPublic = TpmRsaPublic | TpmEccPublic;

function writeSymDef(w: TpmWriter, s: TpmSymDef): void {
  w.u16(s.algorithm);
  if (s.algorithm !== TPM_ALG.NULL) w.u16(s.keyBits ?? 0).u16(s.mode ?? 0);
}

function readSymDef(r: TpmReader): TpmSymDef {
  const algorithm = r.u16();
  if (algorithm === TPM_ALG.NULL) return { algorithm };
  return { algorithm, keyBits: r.u16(), mode: r.u16() };
}

function writeScheme(w: TpmWriter, s: TpmScheme): void {
  w.u16(s.scheme);
  if (s.scheme === TPM_ALG.NULL) return;
  w.u16(s.hashAlg ?? TPM_ALG.NULL);
  if (s.scheme === TPM_ALG.ECDAA) w.u16(s.count ?? 0);
}

function readScheme(r: TpmReader): TpmScheme {
  const scheme = r.u16();
  if (scheme === TPM_ALG.NULL) return { scheme };
  const hashAlg = r.u16();
  if (scheme === TPM_ALG.ECDAA) return { scheme, hashAlg, count: r.u16() };
  return { scheme, hashAlg };
}

export function encodeTpmPublic(p: TpmPublic): Uint8Array {
  const w = new TpmWriter();
  w.u16(p.type).u16(p.nameAlg).u32(p.objectAttributes).tpm2b(p.authPolicy);
  if (p.type === TPM_ALG.RSA) {
    writeSymDef(w, p.parameters.symmetric);
    writeScheme(w, p.parameters.scheme);
    w.u16(p.parameters.keyBits).u32(p.parameters.exponent);
    w.tpm2b(p.unique.n);
  } else {
    writeSymDef(w, p.parameters.symmetric);
    writeScheme(w, p.parameters.scheme);
    w.u16(p.parameters.curveId);
    writeScheme(w, p.parameters.kdf);
    w.tpm2b(p.unique.x).tpm2b(p.unique.y);
  }
  return w.finish();
}

/** Reads a TPMT_PUBLIC from a reader (inside a TPM2B_PUBLIC or alone). */
export function readTpmPublic(r: TpmReader): TpmPublic {
  const type = r.u16();
  const nameAlg = r.u16();
  const objectAttributes = r.u32();
  const authPolicy = r.tpm2b(64);
  if (type === TPM_ALG.RSA) {
    const symmetric = readSymDef(r);
    const scheme = readScheme(r);
    const keyBits = r.u16();
    const exponent = r.u32();
    const n = r.tpm2b(512);
    return {
      type,
      nameAlg,
      objectAttributes,
      authPolicy,
      parameters: { symmetric, scheme, keyBits, exponent },
      unique: { n },
    };
  }
  if (type === TPM_ALG.ECC) {
    const symmetric = readSymDef(r);
    const scheme = readScheme(r);
    const curveId = r.u16();
    const kdf = readScheme(r);
    const x = r.tpm2b(128);
    const y = r.tpm2b(128);
    return {
      type,
      nameAlg,
      objectAttributes,
      authPolicy,
      parameters: { symmetric, scheme, curveId, kdf },
      unique: { x, y },
    };
  }
  throw new TpmFormatError(`TPMT_PUBLIC of type 0x${type.toString(16)} is not supported (only RSA and ECC keys)`);
}

/** Parses a complete TPMT_PUBLIC (no TPM2B size prefix). */
export function parseTpmPublic(bytes: Uint8Array): TpmPublic {
  const r = new TpmReader(bytes, 'TPMT_PUBLIC');
  const pub = readTpmPublic(r);
  r.end();
  return pub;
}

/**
 * The key a TPMT_PUBLIC describes, for signature verification. A key node:crypto refuses (an ECC point off its
 * curve, an RSA modulus of no use) is a TpmFormatError, like any other malformed structure.
 */
export function publicKeyFromTpmPublic(pub: TpmPublic): KeyObject {
  const key = keyOf(pub);
  try {
    return createPublicKey({ key, format: 'jwk' });
  } catch {
    throw new TpmFormatError(
      `the ${pub.type === TPM_ALG.RSA ? 'RSA' : 'ECC'} key of the TPMT_PUBLIC is not a valid public key${pub.type === TPM_ALG.ECC ? ' (its point is not on the curve)' : ''}`,
    );
  }
}

function keyOf(pub: TpmPublic): JsonWebKey {
  if (pub.type === TPM_ALG.RSA) {
    const e = pub.parameters.exponent === 0 ? 65537 : pub.parameters.exponent;
    const eBytes = Buffer.alloc(4);
    eBytes.writeUInt32BE(e);
    let i = 0;
    while (i < 3 && eBytes[i] === 0) i++;
    return {
      kty: 'RSA',
      n: Buffer.from(pub.unique.n).toString('base64url'),
      e: eBytes.subarray(i).toString('base64url'),
    };
  }
  const curve = ECC_CURVES.get(pub.parameters.curveId);
  if (!curve) throw new TpmFormatError(`ECC curve 0x${pub.parameters.curveId.toString(16)} is not supported`);
  return {
    kty: 'EC',
    crv: curve.jwk,
    x: leftPad(pub.unique.x, curve.size).toString('base64url'),
    y: leftPad(pub.unique.y, curve.size).toString('base64url'),
  };
}

/** The TPM name of an object: nameAlg ‖ H_nameAlg(TPMT_PUBLIC). */
export function tpmName(publicArea: Uint8Array): Uint8Array {
  const nameAlg = (publicArea[2] << 8) | publicArea[3];
  const hash = hashAlgInfo(nameAlg);
  if (!hash) throw new TpmFormatError(`TPMT_PUBLIC nameAlg ${hashAlgName(nameAlg)} is not supported`);
  const out = Buffer.alloc(2 + hash.size);
  out.writeUInt16BE(nameAlg);
  createHash(hash.name).update(publicArea).digest().copy(out, 2);
  return new Uint8Array(out);
}

// ---------------------------------------------------------------- TPMT_SIGNATURE

export type TpmSignature =
  | { sigAlg: typeof TPM_ALG.RSASSA | typeof TPM_ALG.RSAPSS; hashAlg: number; sig: Uint8Array }
  | { sigAlg: typeof TPM_ALG.ECDSA; hashAlg: number; r: Uint8Array; s: Uint8Array };

export function parseTpmSignature(bytes: Uint8Array): TpmSignature {
  const r = new TpmReader(bytes, 'TPMT_SIGNATURE');
  const sigAlg = r.u16();
  let out: TpmSignature;
  if (sigAlg === TPM_ALG.RSASSA || sigAlg === TPM_ALG.RSAPSS) {
    out = { sigAlg, hashAlg: r.u16(), sig: r.tpm2b(512) };
  } else if (sigAlg === TPM_ALG.ECDSA) {
    out = { sigAlg, hashAlg: r.u16(), r: r.tpm2b(128), s: r.tpm2b(128) };
  } else {
    throw new TpmFormatError(
      `TPMT_SIGNATURE algorithm 0x${sigAlg.toString(16)} is not supported (RSASSA, RSAPSS, ECDSA are)`,
    );
  }
  r.end();
  return out;
}

export function encodeTpmSignature(sig: TpmSignature): Uint8Array {
  const w = new TpmWriter().u16(sig.sigAlg).u16(sig.hashAlg);
  if (sig.sigAlg === TPM_ALG.ECDSA) w.tpm2b(sig.r).tpm2b(sig.s);
  else w.tpm2b(sig.sig);
  return w.finish();
}

/** Reads a TPMT_SIGNATURE from inside a response (its length is implied by its content). */
export function readTpmSignature(r: TpmReader): Uint8Array {
  const start = r.offset;
  const sigAlg = r.u16();
  if (sigAlg === TPM_ALG.NULL) return r.data.slice(start, r.offset);
  r.u16();
  r.tpm2b();
  if (sigAlg === TPM_ALG.ECDSA || sigAlg === TPM_ALG.ECSCHNORR || sigAlg === TPM_ALG.ECDAA) r.tpm2b();
  return r.data.slice(start, r.offset);
}

// ---------------------------------------------------------------- TPMS_ATTEST

export interface TpmClockInfo {
  clock: bigint;
  resetCount: number;
  restartCount: number;
  safe: boolean;
}

export interface TpmAttest {
  magic: number;
  type: number;
  qualifiedSigner: Uint8Array;
  extraData: Uint8Array;
  clockInfo: TpmClockInfo;
  firmwareVersion: bigint;
  /** TPMS_QUOTE_INFO (only quotes are accepted). */
  quote: { pcrSelect: PcrSelection[]; pcrDigest: Uint8Array };
}

/** Parses a TPMS_ATTEST. Only quotes carry a parsed body; other attestation types are refused. */
export function parseTpmAttest(bytes: Uint8Array): TpmAttest {
  const r = new TpmReader(bytes, 'TPMS_ATTEST');
  const magic = r.u32();
  if (magic !== TPM_GENERATED_VALUE)
    throw new TpmFormatError(
      `TPMS_ATTEST magic is 0x${magic.toString(16)}, not TPM_GENERATED_VALUE: not made by a TPM`,
    );
  const type = r.u16();
  const qualifiedSigner = r.tpm2b(2 + 64);
  const extraData = r.tpm2b(64);
  const clockInfo = { clock: r.u64(), resetCount: r.u32(), restartCount: r.u32(), safe: r.u8() === 1 };
  const firmwareVersion = r.u64();
  if (type !== TPM_ST.ATTEST_QUOTE) throw new TpmFormatError(`TPMS_ATTEST type 0x${type.toString(16)} is not a quote`);
  const pcrSelect = readPcrSelections(r);
  const pcrDigest = r.tpm2b(64);
  r.end();
  return { magic, type, qualifiedSigner, extraData, clockInfo, firmwareVersion, quote: { pcrSelect, pcrDigest } };
}

function leftPad(bytes: Uint8Array, size: number): Buffer {
  if (bytes.length > size)
    throw new TpmFormatError(`ECC coordinate of ${bytes.length} bytes is longer than the curve's ${size}`);
  const out = Buffer.alloc(size);
  out.set(bytes, size - bytes.length);
  return out;
}
