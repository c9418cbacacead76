/**
 * A self-signed X.509 v3 certificate (ECDSA P-256, SHA-256) for the attested channels' TLS server, made with
 * @peculiar/x509 (through lib/x509) on node's WebCrypto. No extensions: clients ignore the chain, because
 * attestation inside the channel authenticates the peer.
 */
import { KeyObject, randomBytes, webcrypto } from 'node:crypto';
import type { X509CertificateCreateSelfSignedParams } from '../x509.js';

export interface SelfSignedCertificate {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
}

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export async function createSelfSignedCertificate(commonName: string, now: Date = new Date(), validDays = 365): Promise<SelfSignedCertificate> {
  // Loaded here: the X.509 library is heavy and only servers need it, not every CLI command that imports atls.
  const x509 = await import('../x509.js');
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: `01${randomBytes(15).toString('hex')}`, // positive: leading 0x01
    name: [{ CN: [commonName] }],
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + validDays * 86_400_000),
    keys: keys as unknown as X509CertificateCreateSelfSignedParams['keys'],
    signingAlgorithm: ALGORITHM,
  });
  return {
    cert: cert.toString('pem'),
    key: KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
