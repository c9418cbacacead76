/**
 * Verification of one TPM 2.0 quote against the attestation key that signed it (docs/design.md#attestation, checks 2–4):
 * the AK is a restricted signing key, its signature covers the TPMS_ATTEST, the quote carries the expected
 * qualifying data, and its PCR digest equals the digest of exactly the PCR values handed in. Only after this
 * are those PCR values evidence.
 */
import { constants, createHash, timingSafeEqual, verify, type KeyObject } from 'node:crypto';
import { ECC_CURVES, hashAlgInfo, hashAlgName, TPM_ALG, TPMA_OBJECT } from '../tpm/constants.js';
import { TpmFormatError } from '../tpm/marshal.js';
import {
  parseTpmAttest,
  parseTpmPublic,
  parseTpmSignature,
  publicKeyFromTpmPublic,
  type TpmAttest,
  type TpmPublic,
  type TpmSignature,
} from '../tpm/structures.js';
import { AttestationError } from './types.js';

export interface TpmQuoteEvidence {
  /** The AK's TPMT_PUBLIC. */
  akPublic: Uint8Array;
  /** TPMS_ATTEST as the TPM signed it. */
  quote: Uint8Array;
  /** TPMT_SIGNATURE. */
  signature: Uint8Array;
  /** PCR index -> value of the bank `hashAlg`; must be exactly the PCRs the quote selects. */
  pcrs: Map<number, Uint8Array> | Record<number | string, Uint8Array>;
  /** TPM algorithm id of the PCR bank: 4 SHA-1, 11 SHA-256, 12 SHA-384, 13 SHA-512. */
  hashAlg: number;
  /** The extraData the quote must carry (empty when the quote was made without a nonce). */
  qualifyingData: Uint8Array;
}

/** Throws AttestationError naming the failed check; returns the parsed quote when every check passed. */
export function verifyTpmQuote(evidence: TpmQuoteEvidence): TpmAttest {
  const bank = hashAlgInfo(evidence.hashAlg);
  if (!bank) throw new AttestationError(`Unknown PCR bank hash algorithm ${hashAlgName(evidence.hashAlg)}`);
  const ak = parsed('attestation key (TPMT_PUBLIC)', () => parseTpmPublic(evidence.akPublic));
  checkAkAttributes(ak);
  const signature = parsed('quote signature (TPMT_SIGNATURE)', () => parseTpmSignature(evidence.signature));
  verifySignature(evidence.akPublic, ak, signature, evidence.quote);

  const attest = parsed('quote (TPMS_ATTEST)', () => parseTpmAttest(evidence.quote));
  if (!bytesEqual(attest.extraData, evidence.qualifyingData)) {
    throw new AttestationError(
      'The quote was made for other qualifying data: it is not bound to this nonce, user data and instance',
      undefined,
      {
        hint: 'A replayed or foreign quote, or the issuer computed the qualifying data differently.',
      },
    );
  }

  const selections = attest.quote.pcrSelect.filter((s) => s.pcrs.length > 0);
  if (selections.length !== 1 || selections[0].hashAlg !== evidence.hashAlg) {
    const what = selections.map((s) => `${hashAlgName(s.hashAlg)}:${s.pcrs.join(',')}`).join(' ') || 'nothing';
    throw new AttestationError(`The quote selects ${what}, not PCRs of the ${bank.name} bank alone`);
  }
  const selected = selections[0].pcrs;
  const values = toMap(evidence.pcrs);
  const given = [...values.keys()].sort((a, b) => a - b);
  if (given.length !== selected.length || given.some((v, i) => v !== selected[i])) {
    throw new AttestationError(
      `The quote covers PCRs ${selected.join(',') || 'none'}, but values were given for PCRs ${given.join(',') || 'none'}`,
    );
  }
  const ordered = selected.map((index) => {
    const value = values.get(index)!;
    if (value.length !== bank.size)
      throw new AttestationError(`PCR ${index} has ${value.length} bytes, a ${bank.name} value has ${bank.size}`);
    return value;
  });
  if (!bytesEqual(pcrDigest(signature.hashAlg, ordered), attest.quote.pcrDigest)) {
    throw new AttestationError(
      `The PCR values do not match the quote's PCR digest (${bank.name} PCRs ${selected.join(',')}): a PCR value was changed`,
    );
  }
  return attest;
}

/** PCR digest as TPM2_Quote computes it: H(values in selection order), H being the signing scheme's hash. */
export function pcrDigest(signatureHashAlg: number, values: Uint8Array[]): Uint8Array {
  const info = hashAlgInfo(signatureHashAlg);
  if (!info) throw new AttestationError(`Unknown hash algorithm ${hashAlgName(signatureHashAlg)}`);
  const h = createHash(info.name);
  for (const v of values) h.update(v);
  return new Uint8Array(h.digest());
}

/** Only a restricted signing key that never leaves its TPM signs nothing but TPM-generated structures. */
function checkAkAttributes(ak: TpmPublic): void {
  const need = TPMA_OBJECT.sign | TPMA_OBJECT.restricted | TPMA_OBJECT.fixedTPM;
  if ((ak.objectAttributes & need) !== need) {
    throw new AttestationError(
      'The attestation key is not a restricted signing key fixed to its TPM: its signatures do not prove a TPM made the quote',
    );
  }
}

function verifySignature(akPublic: Uint8Array, ak: TpmPublic, sig: TpmSignature, message: Uint8Array): void {
  const keyScheme = ak.parameters.scheme;
  if (keyScheme.scheme !== TPM_ALG.NULL && (keyScheme.scheme !== sig.sigAlg || keyScheme.hashAlg !== sig.hashAlg)) {
    throw new AttestationError("The quote's signature scheme differs from the attestation key's scheme");
  }
  const hash = hashAlgInfo(sig.hashAlg);
  if (!hash || sig.hashAlg === TPM_ALG.SHA1)
    throw new AttestationError(`Quote signatures with ${hashAlgName(sig.hashAlg)} are not accepted`);
  const key = parsed('attestation key', () => akKey(akPublic, ak));
  let ok: boolean;
  if (sig.sigAlg === TPM_ALG.ECDSA) {
    if (ak.type !== TPM_ALG.ECC) throw new AttestationError('An ECDSA signature from an RSA attestation key');
    const size = ECC_CURVES.get(ak.parameters.curveId)!.size; // known: the key was built from it
    if (sig.r.length > size || sig.s.length > size) throw new AttestationError('The quote signature is malformed');
    const raw = Buffer.alloc(2 * size);
    raw.set(sig.r, size - sig.r.length);
    raw.set(sig.s, 2 * size - sig.s.length);
    ok = verify(hash.name, message, { key, dsaEncoding: 'ieee-p1363' }, raw);
  } else {
    if (ak.type !== TPM_ALG.RSA) throw new AttestationError('An RSA signature from an ECC attestation key');
    const padding = sig.sigAlg === TPM_ALG.RSAPSS ? constants.RSA_PKCS1_PSS_PADDING : constants.RSA_PKCS1_PADDING;
    ok = verify(hash.name, message, { key, padding, saltLength: constants.RSA_PSS_SALTLEN_AUTO }, sig.sig);
  }
  if (!ok)
    throw new AttestationError(
      'The quote signature does not verify with the attestation key: the quote was altered or signed by another key',
    );
}

/**
 * The AK's public key object, remembered by its public area: building one from a JWK takes ~65 µs, as long
 * as the signature check itself, and a verifier sees the same few AKs again and again. The key is a pure
 * function of those bytes, so a remembered one is exactly what a fresh build would give.
 */
const akKeys = new Map<string, KeyObject>();
const AK_KEYS_KEPT = 1024;

function akKey(akPublic: Uint8Array, ak: TpmPublic): KeyObject {
  const id = Buffer.from(akPublic).toString('base64');
  let key = akKeys.get(id);
  if (key === undefined) {
    key = publicKeyFromTpmPublic(ak);
    if (akKeys.size >= AK_KEYS_KEPT) akKeys.delete(akKeys.keys().next().value!);
    akKeys.set(id, key);
  }
  return key;
}

function parsed<T>(what: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (
      err instanceof TpmFormatError ||
      err instanceof TypeError ||
      (err as { code?: string }).code?.startsWith('ERR_')
    ) {
      throw new AttestationError(`Malformed ${what}: ${(err as Error).message}`, undefined, { cause: err });
    }
    throw err;
  }
}

function toMap(pcrs: TpmQuoteEvidence['pcrs']): Map<number, Uint8Array> {
  if (pcrs instanceof Map) return pcrs;
  const out = new Map<number, Uint8Array>();
  for (const [k, v] of Object.entries(pcrs)) {
    const index = Number(k);
    if (!Number.isInteger(index) || index < 0 || index > 23 || String(index) !== k)
      throw new AttestationError(`Invalid PCR index "${k}"`);
    out.set(index, v);
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
