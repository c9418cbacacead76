/**
 * A self-signed X.509 v3 certificate (ECDSA P-256, SHA-256) for the attested channels' TLS server, built as DER by
 * lib/pki/certificates.ts and signed with node:crypto: every attested server makes one when it starts, so a node
 * program's start-up does not load an X.509 library for it. Its only extensions are the subject and authority key
 * identifiers; clients ignore the chain, because attestation inside the channel authenticates the peer.
 */
import { generateKeyPair, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { encodeName, issueCertificate, OID } from '../pki/certificates.js';

export interface SelfSignedCertificate {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
}

const generateEcKeyPair = promisify(generateKeyPair);

export async function createSelfSignedCertificate(
  commonName: string,
  now: Date = new Date(),
  validDays = 365,
): Promise<SelfSignedCertificate> {
  const { publicKey, privateKey } = await generateEcKeyPair('ec', { namedCurve: 'P-256' });
  const der = issueCertificate(
    {
      subject: encodeName([[OID.commonName, commonName]]),
      publicKey: publicKey.export({ type: 'spki', format: 'der' }),
      notBefore: new Date(now.getTime() - 60_000),
      notAfter: new Date(now.getTime() + validDays * 86_400_000),
      extensions: [],
      serial: Buffer.concat([Buffer.of(0x01), randomBytes(15)]), // positive: leading 0x01
    },
    { self: privateKey },
  );
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
