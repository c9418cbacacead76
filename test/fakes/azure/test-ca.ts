/**
 * A throwaway CA and a server certificate for 127.0.0.1, made in memory for each fake ARM server: the Azure SDK
 * only sends bearer tokens over HTTPS, so the fake speaks TLS and the SDK trusts this CA via tlsOptions.ca.
 * Hand-written DER (ECDSA P-256, RFC 5280) because @peculiar/x509 needs a reflect-metadata polyfill the project
 * does not ship (see lib/atls/self-signed.ts); we need two extensions more than that module writes.
 */
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

function der(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  const length = n < 0x80 ? Buffer.of(n) : n < 0x100 ? Buffer.of(0x81, n) : Buffer.of(0x82, n >> 8, n & 0xff);
  return Buffer.concat([Buffer.of(tag), length, body]);
}

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * a + b];
  for (const n of rest) {
    const chunk = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) chunk.unshift((v & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

function utcTime(d: Date): Buffer {
  return der(0x17, Buffer.from(d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'));
}

const ECDSA_SHA256 = der(0x30, oid('1.2.840.10045.4.3.2'));
const name = (cn: string) => der(0x30, der(0x31, der(0x30, oid('2.5.4.3'), der(0x0c, Buffer.from(cn)))));
const extension = (id: string, critical: boolean, value: Buffer) =>
  der(0x30, oid(id), ...(critical ? [der(0x01, Buffer.of(0xff))] : []), der(0x04, value));

function certificate(p: { subject: string; issuer: string; publicKey: KeyObject; signer: KeyObject; extensions: Buffer[] }): string {
  const now = Date.now();
  const tbs = der(
    0x30,
    der(0xa0, der(0x02, Buffer.of(2))),
    der(0x02, Buffer.concat([Buffer.of(0x01), randomBytes(15)])),
    ECDSA_SHA256,
    name(p.issuer),
    der(0x30, utcTime(new Date(now - 60_000)), utcTime(new Date(now + 86_400_000))),
    name(p.subject),
    p.publicKey.export({ type: 'spki', format: 'der' }),
    der(0xa3, der(0x30, ...p.extensions)),
  );
  const cert = der(0x30, tbs, ECDSA_SHA256, der(0x03, Buffer.concat([Buffer.of(0), sign('sha256', tbs, p.signer)])));
  return `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
}

export interface TestTls {
  caPem: string;
  certPem: string;
  keyPem: string;
}

export function makeTestTls(): TestTls {
  const ca = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const server = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const caName = 'Fake Azure Test CA';
  const caPem = certificate({
    subject: caName,
    issuer: caName,
    publicKey: ca.publicKey,
    signer: ca.privateKey,
    extensions: [extension('2.5.29.19', true, der(0x30, der(0x01, Buffer.of(0xff))))], // basicConstraints cA
  });
  const certPem = certificate({
    subject: '127.0.0.1',
    issuer: caName,
    publicKey: server.publicKey,
    signer: ca.privateKey,
    // subjectAltName: IP 127.0.0.1, DNS localhost
    extensions: [extension('2.5.29.17', false, der(0x30, der(0x87, Buffer.of(127, 0, 0, 1)), der(0x82, Buffer.from('localhost'))))],
  });
  return { caPem, certPem, keyPem: server.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}
