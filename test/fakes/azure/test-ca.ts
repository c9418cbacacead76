/**
 * A throwaway CA and a server certificate for 127.0.0.1, made in memory with @peculiar/x509 (through test/support/x509.ts):
 * the Azure SDK only sends bearer tokens over HTTPS, so the fake ARM server speaks TLS and the SDK trusts this
 * CA via tlsOptions.ca. Made once per process when this module loads, because WebCrypto signs asynchronously
 * and FakeArm.start takes the material synchronously; no test depends on servers having different CAs.
 */
import { KeyObject, randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '../../support/x509.js';

export interface TestTls {
  caPem: string;
  certPem: string;
  keyPem: string;
}

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

type Keys = x509.X509CertificateCreateSelfSignedParams['keys'];
const generateKeys = async () =>
  (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as unknown as Keys;
const serialNumber = () => `01${randomBytes(15).toString('hex')}`;

async function makeTls(): Promise<TestTls> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - 60_000), notAfter: new Date(now + 86_400_000) };
  const [caKeys, serverKeys] = await Promise.all([generateKeys(), generateKeys()]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: ['Fake Azure Test CA'] }],
    keys: caKeys,
    signingAlgorithm: ALGORITHM,
    ...validity,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  const server = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    issuer: ca.subject,
    subject: [{ CN: ['127.0.0.1'] }],
    publicKey: serverKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALGORITHM,
    ...validity,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'ip', value: '127.0.0.1' },
        { type: 'dns', value: 'localhost' },
      ]),
    ],
  });
  return {
    caPem: ca.toString('pem'),
    certPem: server.toString('pem'),
    keyPem: KeyObject.from(serverKeys.privateKey as unknown as webcrypto.CryptoKey)
      .export({ type: 'pkcs8', format: 'pem' })
      .toString(),
  };
}

const tls = await makeTls();

export function makeTestTls(): TestTls {
  return tls;
}
