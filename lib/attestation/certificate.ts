/**
 * An X.509 certificate from attestation evidence (an SNP VCEK/ASK/ARK, a TDX PCK chain, a vTPM AK certificate),
 * read once and completely with node:crypto: the certificate, its public key and its validity window. Reading
 * all three here means every later use works on checked values: node:crypto parses a certificate whose key it
 * cannot decode and then throws a plain Error from the `publicKey` getter, and a validity date it prints but
 * Date.parse cannot read becomes NaN, which then throws a RangeError inside an error message. Here each is a
 * CertificateError (an AttestationError) naming the certificate. verifyCertChain checks a chain to pinned roots with
 * those values (trusted launch's AK certificates, Azure IMDS's attested documents).
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

/**
 * Verifies `leaf` up through `intermediates` to one of `roots` (compared byte for byte), each certificate valid
 * at `now` and each issuer a CA. Returns the leaf's certificate; throws AttestationError saying what failed.
 */
export function verifyCertChain(
  what: string,
  leafDer: Uint8Array,
  intermediatesDer: Uint8Array[],
  rootsDer: Uint8Array[],
  now: Date,
): X509Certificate {
  const parse = (der: Uint8Array) => ({ der, ...readCertificate(der, `${what}: a certificate`) });
  const leaf = parse(leafDer);
  const pool = [...intermediatesDer, ...rootsDer].map(parse);
  const isRoot = (der: Uint8Array) => rootsDer.some((r) => Buffer.from(r).equals(der));
  const valid = (c: ReadCertificate) => now.getTime() >= c.notBefore && now.getTime() <= c.notAfter;
  let current = leaf;
  for (let depth = 0; depth < 6; depth++) {
    if (!valid(current))
      throw new AttestationError(
        `${what}: certificate "${current.cert.subject.replace(/\n/g, ', ')}" is not valid at ${now.toISOString()}`,
      );
    if (isRoot(current.der)) return leaf.cert;
    const issuer = pool.find(
      (p) => p.cert.ca && current.cert.checkIssued(p.cert) && signedBy(current.cert, p.publicKey),
    );
    if (!issuer)
      throw new AttestationError(
        `${what}: certificate "${current.cert.subject.replace(/\n/g, ', ')}" does not chain to a trusted root`,
      );
    current = issuer;
  }
  throw new AttestationError(`${what}: the certificate chain is too long`);
}
