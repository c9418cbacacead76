/**
 * A tiny X.509 certificate maker for tests: a DER encoder plus node:crypto signing. It stands in for AMD's,
 * Intel's and Microsoft's CAs so every verification path can be exercised with evidence made in the test.
 */
import { constants, sign, type KeyObject } from 'node:crypto';

function len(n: number): number[] {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return [0x80 | bytes.length, ...bytes];
}

export function tlv(tag: number, ...content: Uint8Array[]): Uint8Array {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag, ...len(body.length)]), body]);
}

export const seq = (...c: Uint8Array[]) => tlv(0x30, ...c);
export const set = (...c: Uint8Array[]) => tlv(0x31, ...c);
export const octet = (b: Uint8Array) => tlv(0x04, b);
export const explicit = (n: number, ...c: Uint8Array[]) => tlv(0xa0 + n, ...c);
export const derNull = () => Buffer.from([0x05, 0x00]);
export const ia5 = (s: string) => tlv(0x16, Buffer.from(s, 'latin1'));

export function int(v: number | bigint): Uint8Array {
  let hex = BigInt(v).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let b = Buffer.from(hex, 'hex');
  if (b[0] & 0x80) b = Buffer.concat([Buffer.of(0), b]);
  return tlv(0x02, b);
}

export function oid(dotted: string): Uint8Array {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [a * 40 + b];
  for (const n of rest) {
    const enc = [n & 0x7f];
    for (let v = Math.floor(n / 128); v > 0; v = Math.floor(v / 128)) enc.unshift(0x80 | (v & 0x7f));
    out.push(...enc);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(d: Date): Uint8Array {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2))) : tlv(0x18, Buffer.from(iso));
}

const name = (cn: string) => seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn)))));

export type SignatureKind = 'rsa-pss-sha384' | 'ecdsa-sha256' | 'ecdsa-sha384' | 'rsa-sha256';

function algorithm(kind: SignatureKind): Uint8Array {
  switch (kind) {
    case 'rsa-pss-sha384': {
      const sha384 = seq(oid('2.16.840.1.101.3.4.2.2'), derNull());
      return seq(oid('1.2.840.113549.1.1.10'), seq(explicit(0, sha384), explicit(1, seq(oid('1.2.840.113549.1.1.8'), sha384)), explicit(2, int(48))));
    }
    case 'ecdsa-sha256':
      return seq(oid('1.2.840.10045.4.3.2'));
    case 'ecdsa-sha384':
      return seq(oid('1.2.840.10045.4.3.3'));
    case 'rsa-sha256':
      return seq(oid('1.2.840.113549.1.1.11'), derNull());
  }
}

function signTbs(kind: SignatureKind, tbs: Uint8Array, key: KeyObject): Uint8Array {
  switch (kind) {
    case 'rsa-pss-sha384':
      return sign('sha384', tbs, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 48 });
    case 'ecdsa-sha256':
    case 'rsa-sha256':
      return sign('sha256', tbs, key);
    case 'ecdsa-sha384':
      return sign('sha384', tbs, key);
  }
}

export interface Extension {
  oid: string;
  value: Uint8Array;
  critical?: boolean;
}

export interface CertSpec {
  subject: string;
  issuer: string;
  publicKey: KeyObject;
  signingKey: KeyObject;
  signature: SignatureKind;
  notBefore?: Date;
  notAfter?: Date;
  serial?: number;
  ca?: boolean;
  extensions?: Extension[];
}

export interface TestCert {
  der: Uint8Array;
  pem: string;
}

export function makeCert(spec: CertSpec): TestCert {
  const exts = [...(spec.extensions ?? [])];
  if (spec.ca) exts.unshift({ oid: '2.5.29.19', critical: true, value: seq(tlv(0x01, Buffer.of(0xff))) });
  const tbs = seq(
    explicit(0, int(2)),
    int(spec.serial ?? 1),
    algorithm(spec.signature),
    name(spec.issuer),
    seq(time(spec.notBefore ?? new Date('2020-01-01T00:00:00Z')), time(spec.notAfter ?? new Date('2045-01-01T00:00:00Z'))),
    name(spec.subject),
    spec.publicKey.export({ type: 'spki', format: 'der' }),
    ...(exts.length > 0 ? [explicit(3, seq(...exts.map((e) => seq(oid(e.oid), ...(e.critical ? [tlv(0x01, Buffer.of(0xff))] : []), octet(e.value)))))] : []),
  );
  const signature = signTbs(spec.signature, tbs, spec.signingKey);
  const der = seq(tbs, algorithm(spec.signature), tlv(0x03, Buffer.of(0), signature));
  const b64 = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n');
  return { der: new Uint8Array(der), pem: `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n` };
}
