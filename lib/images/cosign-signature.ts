/**
 * Detached blob signatures in the format of Sigstore's `cosign sign-blob --key`: ECDSA P-256 over SHA-256 of the
 * file's exact bytes, the signature DER-encoded (SEQUENCE { r INTEGER, s INTEGER }) and then base64 (standard
 * alphabet, padded, no line breaks). So
 *
 *   cosign verify-blob --key key.pub --signature file.sig --insecure-ignore-tlog=true file
 *
 * accepts a signature signBlob makes, and verifyBlob accepts one cosign makes (test/images/cosign-signature.test.ts
 * checks a signature made by cosign). Public keys are PEM "PUBLIC KEY" (SubjectPublicKeyInfo), the format of the
 * cosign.pub that `cosign generate-key-pair` writes. Our own private keys are plain PKCS#8 PEM ("PRIVATE KEY"):
 * cosign's private-key file is encrypted (scrypt + NaCl secretbox), which nothing here needs to read.
 * The keys themselves (P-256 only, PEM in and out, fingerprints) are lib/signing-keys.ts.
 */
import { sign, verify, type KeyObject } from 'node:crypto';

/** The base64 signature of `data` (cosign sign-blob's output). */
export function signBlob(privateKey: KeyObject, data: Uint8Array): string {
  return sign('sha256', data, { key: privateKey, dsaEncoding: 'der' }).toString('base64');
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * The DER signature in a signature file: base64, as cosign writes it (line breaks and surrounding white space are
 * ignored, as cosign's Go decoder ignores them). Undefined when the text is not base64.
 */
export function decodeSignature(signature: string | Uint8Array): Buffer | undefined {
  const text = (typeof signature === 'string' ? signature : Buffer.from(signature).toString('latin1'))
    .replace(/[\r\n]/g, '')
    .trim();
  if (!BASE64.test(text) || text.length % 4 !== 0) return undefined;
  return Buffer.from(text, 'base64');
}

/** True when `signature` (a signature file's content) is a valid signature of `data` by `publicKey`. */
export function verifyBlob(publicKey: KeyObject, data: Uint8Array, signature: string | Uint8Array): boolean {
  const der = decodeSignature(signature);
  if (!der) return false;
  try {
    return verify('sha256', data, { key: publicKey, dsaEncoding: 'der' }, der);
  } catch {
    // OpenSSL throws on some malformed DER instead of answering false.
    return false;
  }
}
