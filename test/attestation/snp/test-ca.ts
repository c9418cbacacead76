/**
 * A tiny X.509 certificate maker for tests: lib/der.ts's encoder plus node:crypto signing. It stands in for AMD's,
 * Intel's and Microsoft's CAs so every verification path can be exercised with evidence made in the test.
 * Synchronous on purpose (@peculiar/x509 signs only through asynchronous WebCrypto), so fixtures build whole
 * chains inline.
 */
import { constants, sign, type KeyObject } from 'node:crypto';
import {
  bitString,
  bool,
  explicit,
  nullValue,
  octetString,
  oid,
  sequence as seq,
  set,
  TAG,
  time,
  tlv,
  unsignedInteger,
  utf8String,
} from '../../../lib/der.js';

export const ia5 = (s: string) => tlv(TAG.IA5_STRING, Buffer.from(s, 'latin1'));

export function int(v: number | bigint): Uint8Array {
  let hex = BigInt(v).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  return unsignedInteger(Buffer.from(hex, 'hex'));
}

const name = (cn: string) => seq(set(seq(oid('2.5.4.3'), utf8String(cn))));

export type SignatureKind = 'rsa-pss-sha384' | 'ecdsa-sha256' | 'ecdsa-sha384' | 'rsa-sha256';

function algorithm(kind: SignatureKind): Uint8Array {
  switch (kind) {
    case 'rsa-pss-sha384': {
      const sha384 = seq(oid('2.16.840.1.101.3.4.2.2'), nullValue());
      return seq(
        oid('1.2.840.113549.1.1.10'),
        seq(explicit(0, sha384), explicit(1, seq(oid('1.2.840.113549.1.1.8'), sha384)), explicit(2, int(48))),
      );
    }
    case 'ecdsa-sha256':
      return seq(oid('1.2.840.10045.4.3.2'));
    case 'ecdsa-sha384':
      return seq(oid('1.2.840.10045.4.3.3'));
    case 'rsa-sha256':
      return seq(oid('1.2.840.113549.1.1.11'), nullValue());
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
  /** A SubjectPublicKeyInfo to put in place of `publicKey`'s (one node:crypto cannot decode, say). */
  spki?: Uint8Array;
  /** The encoded notBefore Time in place of `notBefore`'s (an unreadable date, say). */
  notBeforeRaw?: Uint8Array;
}

export interface TestCert {
  der: Uint8Array;
  pem: string;
}

export function makeCert(spec: CertSpec): TestCert {
  const exts = [...(spec.extensions ?? [])];
  if (spec.ca) exts.unshift({ oid: '2.5.29.19', critical: true, value: seq(bool(true)) });
  const tbs = seq(
    explicit(0, int(2)),
    int(spec.serial ?? 1),
    algorithm(spec.signature),
    name(spec.issuer),
    seq(
      spec.notBeforeRaw ?? time(spec.notBefore ?? new Date('2020-01-01T00:00:00Z')),
      time(spec.notAfter ?? new Date('2045-01-01T00:00:00Z')),
    ),
    name(spec.subject),
    spec.spki ?? spec.publicKey.export({ type: 'spki', format: 'der' }),
    ...(exts.length > 0
      ? [
          explicit(
            3,
            seq(...exts.map((e) => seq(oid(e.oid), ...(e.critical ? [bool(true)] : []), octetString(e.value)))),
          ),
        ]
      : []),
  );
  const signature = signTbs(spec.signature, tbs, spec.signingKey);
  const der = seq(tbs, algorithm(spec.signature), bitString(signature));
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n');
  return { der: new Uint8Array(der), pem: `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n` };
}

/** A UTCTime element with exactly `text` (which need not be a valid time). */
export function tlvTime(text: string): Uint8Array {
  return tlv(TAG.UTC_TIME, Buffer.from(text, 'latin1'));
}
