/**
 * An X.509 certificate from attestation evidence (an SNP VCEK/ASK/ARK, a TDX PCK chain, a vTPM AK certificate),
 * read once and completely with node:crypto: the certificate, its public key and its validity window. Reading
 * all three here means every later use works on checked values: node:crypto parses a certificate whose key it
 * cannot decode and then throws a plain Error from the `publicKey` getter, and a validity date it prints but
 * Date.parse cannot read becomes NaN, which then throws a RangeError inside an error message. Here each is a
 * CertificateError (an AttestationError) naming the certificate.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { AttestationError } from './types.js';

export class CertificateError extends AttestationError {}

export interface ReadCertificate {
  cert: X509Certificate;
  publicKey: KeyObject;
  /** Milliseconds since the epoch. */
  notBefore: number;
  notAfter: number;
}

/** Reads a DER (or PEM) certificate; `what` names it in messages ("the ASK certificate"). */
export function readCertificate(der: Uint8Array | string, what: string): ReadCertificate {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(der);
  } catch {
    throw new CertificateError(`${what} is not a valid X.509 certificate`);
  }
  let publicKey: KeyObject;
  try {
    publicKey = cert.publicKey;
  } catch {
    throw new CertificateError(`${what} holds a public key that cannot be decoded`);
  }
  const notBefore = Date.parse(cert.validFrom);
  const notAfter = Date.parse(cert.validTo);
  if (Number.isNaN(notBefore) || Number.isNaN(notAfter))
    throw new CertificateError(`${what} has a validity date that cannot be read`);
  return { cert, publicKey, notBefore, notAfter };
}

/** Whether `cert` carries a valid signature by `issuerKey`; false (never an exception) for keys of unsuitable types. */
export function signedBy(cert: X509Certificate, issuerKey: KeyObject): boolean {
  try {
    return cert.verify(issuerKey);
  } catch {
    return false;
  }
}
