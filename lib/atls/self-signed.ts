/**
 * A minimal self-signed X.509 v3 certificate (ECDSA P-256, SHA-256) for the attested channels' TLS server.
 * Written here because Node's crypto cannot make certificates and @peculiar/x509 cannot load without a global
 * reflect-metadata polyfill that this project does not ship; the structure is fixed and small (RFC 5280 §4.1:
 * no extensions, since clients ignore the chain and attestation authenticates the peer).
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

export interface SelfSignedCertificate {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
}

const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';
const OID_COMMON_NAME = '2.5.4.3';

export function createSelfSignedCertificate(commonName: string, now: Date = new Date(), validDays = 365): SelfSignedCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const algorithm = der(0x30, oid(OID_ECDSA_WITH_SHA256));
  const name = der(0x30, der(0x31, der(0x30, oid(OID_COMMON_NAME), der(0x0c, Buffer.from(commonName, 'utf8')))));
  const notBefore = new Date(now.getTime() - 60_000);
  const notAfter = new Date(now.getTime() + validDays * 86_400_000);
  const tbs = der(
    0x30,
    der(0xa0, der(0x02, Buffer.of(2))), // [0] version v3
    der(0x02, Buffer.concat([Buffer.of(0x01), randomBytes(15)])), // positive serial: leading 0x01
    algorithm,
    name,
    der(0x30, utcTime(notBefore), utcTime(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
  );
  const signature = sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value
  const cert = der(0x30, tbs, algorithm, der(0x03, Buffer.concat([Buffer.of(0), signature])));
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const n = body.length;
  const length = n < 0x80 ? Buffer.of(n) : n < 0x100 ? Buffer.of(0x81, n) : Buffer.of(0x82, n >> 8, n & 0xff);
  return Buffer.concat([Buffer.of(tag), length, body]);
}

function oid(dotted: string): Buffer {
  const [first, second, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * first + second];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let v = arc >> 7; v > 0; v >>= 7) chunk.unshift((v & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

/** UTCTime (YYMMDDHHMMSSZ); valid for the years 1950–2049, which covers every certificate made here. */
function utcTime(date: Date): Buffer {
  const iso = date.toISOString(); // 2024-05-01T12:34:56.789Z
  const text = iso.slice(2, 4) + iso.slice(5, 7) + iso.slice(8, 10) + iso.slice(11, 13) + iso.slice(14, 16) + iso.slice(17, 19) + 'Z';
  return der(0x17, Buffer.from(text, 'ascii'));
}
