/**
 * X.509 certificates and PKCS#10 requests at the speed of the signature itself: building a certificate's or a
 * request's DER (RFC 5280, RFC 2986, with the encoder of lib/der.ts) and signing it with node:crypto, and reading a
 * certificate request and checking its signature.
 *
 * Written here rather than with @peculiar/x509 because that library spends about 7 ms of JavaScript ASN.1
 * work per kubelet certificate on our machines (parse and verify the request, build and sign the
 * certificate), over ten times the ECDSA operations themselves, and the join service signs one per joining
 * node (docs/design.md#cluster-pki; the join-storm benchmark holds it to 3x the cryptographic cost). Loading that
 * library also cost a node program's start about a sixth of its CPU (bench/node-program-startup.bench.ts), so the
 * attested servers' self-signed certificates (lib/atls/self-signed.ts) and the kubelet's request
 * (bootstrapper/kubelet-csr.ts) are made here too. The structures are small and fixed; the tests check every
 * certificate made here with node:crypto's X509Certificate (OpenSSL) and openssl verify, read requests made by
 * @peculiar/x509, and read the requests made here with OpenSSL.
 */
import { createHash, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import {
  bitString,
  bool,
  certificateFields,
  children,
  decodeOid,
  DerError,
  expectTag,
  explicit,
  extensionsOf,
  nullValue,
  octetString,
  oid,
  readOnly,
  sequence,
  set,
  TAG,
  time,
  tlv,
  unsignedInteger,
  utf8String,
} from '../der.js';

export const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  extensionRequest: '1.2.840.113549.1.9.14',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  ecdsaWithSha384: '1.2.840.10045.4.3.3',
  ecdsaWithSha512: '1.2.840.10045.4.3.4',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  sha384WithRsa: '1.2.840.113549.1.1.12',
  sha512WithRsa: '1.2.840.113549.1.1.13',
  ed25519: '1.3.101.112',
} as const;

/** Key usage bits (RFC 5280 §4.2.1.3). */
export const KEY_USAGE = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5 } as const;

/** Signature algorithms accepted on certificate requests: OID -> node:crypto digest (null: the key decides, Ed25519). */
const REQUEST_SIGNATURES: Record<string, string | null> = {
  [OID.ecdsaWithSha256]: 'sha256',
  [OID.ecdsaWithSha384]: 'sha384',
  [OID.ecdsaWithSha512]: 'sha512',
  [OID.sha256WithRsa]: 'sha256',
  [OID.sha384WithRsa]: 'sha384',
  [OID.sha512WithRsa]: 'sha512',
  [OID.ed25519]: null,
};

/** A CA that issues certificates: its subject (DER Name), key identifier and private key. */
export interface Issuer {
  name: Buffer;
  keyIdentifier: Buffer;
  privateKey: KeyObject;
}

export interface CertificateTemplate {
  /** DER Name. */
  subject: Buffer;
  /** DER SubjectPublicKeyInfo of the certified key. */
  publicKey: Buffer;
  notBefore: Date;
  notAfter: Date;
  /** Encoded Extension elements; subject and authority key identifiers are added here. */
  extensions: Buffer[];
  /** Positive serial number, big-endian. */
  serial: Uint8Array;
}

/** Signs `template` with `issuer`'s key; omit the issuer (pass the subject's own key) for a self-signed CA. */
export function issueCertificate(template: CertificateTemplate, issuer: Issuer | { self: KeyObject }): Buffer {
  const selfSigned = 'self' in issuer;
  const keyId = keyIdentifier(template.publicKey);
  const signer = selfSigned ? { name: template.subject, keyIdentifier: keyId, privateKey: issuer.self } : issuer;
  const { algorithm, digest } = signatureAlgorithm(signer.privateKey);
  const tbs = sequence(
    explicit(0, unsignedInteger(Buffer.of(2))), // v3
    unsignedInteger(template.serial),
    algorithm,
    signer.name,
    sequence(time(template.notBefore), time(template.notAfter)),
    template.subject,
    template.publicKey,
    explicit(
      3,
      sequence(
        ...template.extensions,
        extension(OID.subjectKeyIdentifier, false, octetString(keyId)),
        extension(OID.authorityKeyIdentifier, false, sequence(tlv(0x80, signer.keyIdentifier))),
      ),
    ),
  );
  return sequence(tbs, algorithm, bitString(sign(digest, tbs, signer.privateKey)));
}

/**
 * A PKCS#10 certificate request (RFC 2986) for `subject` (DER Name), signed with the requested key pair's private
 * key; `extensions` (encoded Extension elements, e.g. subjectAltName) go into one extensionRequest attribute.
 */
export function createCertificateRequest(
  subject: Buffer,
  keys: { publicKey: KeyObject; privateKey: KeyObject },
  extensions: Buffer[] = [],
): Buffer {
  const { algorithm, digest } = signatureAlgorithm(keys.privateKey);
  const attributes = extensions.length > 0 ? [sequence(oid(OID.extensionRequest), set(sequence(...extensions)))] : [];
  const info = sequence(
    unsignedInteger(Buffer.of(0)), // v1
    subject,
    keys.publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa0, ...attributes), // [0] IMPLICIT SET OF Attribute
  );
  return sequence(info, algorithm, bitString(sign(digest, info, keys.privateKey)));
}

/** A DER Name from (OID, value) pairs, one attribute per RDN, in order. */
export function encodeName(attributes: ReadonlyArray<readonly [string, string]>): Buffer {
  return sequence(...attributes.map(([type, value]) => set(sequence(oid(type), utf8String(value)))));
}

export function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [bool(true)] : []), octetString(value));
}

export function basicConstraints(ca: boolean): Buffer {
  return extension(OID.basicConstraints, true, ca ? sequence(bool(true)) : sequence());
}

export function keyUsage(bits: number[]): Buffer {
  const highest = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1);
  for (const bit of bits) bytes[bit >> 3] |= 0x80 >> (bit & 7);
  return extension(OID.keyUsage, true, bitString(bytes, 7 - (highest & 7)));
}

export function extendedKeyUsage(purposes: string[]): Buffer {
  return extension(OID.extKeyUsage, false, sequence(...purposes.map(oid)));
}

export function subjectAltName(names: { dns?: string[]; ips?: string[] }): Buffer {
  return extension(
    OID.subjectAltName,
    false,
    sequence(
      ...(names.dns ?? []).map((name) => tlv(0x82, Buffer.from(name, 'ascii'))),
      ...(names.ips ?? []).map((ip) => tlv(0x87, ipBytes(ip))),
    ),
  );
}

/** RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits. */
export function keyIdentifier(spki: Buffer): Buffer {
  const [, subjectPublicKey] = children(readOnly(spki, TAG.SEQUENCE, 'SubjectPublicKeyInfo'));
  return createHash('sha1')
    .update(expectTag(subjectPublicKey, TAG.BIT_STRING, 'subjectPublicKey').content.subarray(1))
    .digest();
}

/** The issuer view of a CA certificate (DER): its subject Name and key identifier (its SKI, else computed). */
export function issuerFromCertificate(certDer: Buffer, privateKey: KeyObject): Issuer {
  const fields = certificateFields(readOnly(certDer, TAG.SEQUENCE, 'certificate'));
  const ski = fields.extensions.get(OID.subjectKeyIdentifier);
  return {
    name: fields.subject.raw,
    keyIdentifier: ski
      ? readOnly(ski, TAG.OCTET_STRING, 'subjectKeyIdentifier').content
      : keyIdentifier(fields.publicKey.raw),
    privateKey,
  };
}

export interface CertificateRequest {
  /** DER SubjectPublicKeyInfo of the requested key. */
  publicKey: Buffer;
  dnsNames: string[];
  ipAddresses: string[];
}

/** Reads a PKCS#10 request (DER) and checks its signature. Throws DerError on anything malformed or unverified. */
export function readCertificateRequest(der: Uint8Array): CertificateRequest {
  const [info, algorithm, signature] = children(readOnly(der, TAG.SEQUENCE, 'certificate request'));
  expectTag(info, TAG.SEQUENCE, 'certificationRequestInfo');
  const [version, , spki, attributes] = children(info);
  expectTag(version, TAG.INTEGER, 'version');
  expectTag(spki, TAG.SEQUENCE, 'subjectPKInfo');
  const algorithmId = decodeOid(children(expectTag(algorithm, TAG.SEQUENCE, 'signatureAlgorithm'))[0]);
  if (!(algorithmId in REQUEST_SIGNATURES)) throw new DerError(`unsupported signature algorithm ${algorithmId}`);
  const signatureBits = expectTag(signature, TAG.BIT_STRING, 'signature').content;
  if (signatureBits[0] !== 0) throw new DerError('signature has unused bits');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: spki.raw, format: 'der', type: 'spki' });
  } catch {
    throw new DerError('the public key is malformed');
  }
  let valid = false;
  try {
    valid = verify(REQUEST_SIGNATURES[algorithmId], info.raw, key, signatureBits.subarray(1));
  } catch {
    valid = false;
  }
  if (!valid) throw new DerError('its signature does not verify: it was not signed by the key it names');
  const names = { dnsNames: [] as string[], ipAddresses: [] as string[] };
  for (const attribute of attributes && attributes.tag === 0xa0 ? children(attributes) : []) {
    const [type, values] = children(expectTag(attribute, TAG.SEQUENCE, 'attribute'));
    if (decodeOid(type) !== OID.extensionRequest) continue;
    const san = extensionsOf(children(expectTag(values, TAG.SET, 'attribute values'))[0]).get(OID.subjectAltName);
    if (san) Object.assign(names, readSubjectAltName(san));
  }
  return { publicKey: Buffer.from(spki.raw), ...names };
}

function readSubjectAltName(value: Buffer): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  for (const name of children(readOnly(value, TAG.SEQUENCE, 'subjectAltName'))) {
    if (name.tag === 0x82) dnsNames.push(name.content.toString('ascii'));
    if (name.tag === 0x87) ipAddresses.push(ipString(name.content));
  }
  return { dnsNames, ipAddresses };
}

function signatureAlgorithm(key: KeyObject): { algorithm: Buffer; digest: string } {
  if (key.asymmetricKeyType === 'ec') {
    return key.asymmetricKeyDetails?.namedCurve === 'secp384r1'
      ? { algorithm: sequence(oid(OID.ecdsaWithSha384)), digest: 'sha384' }
      : { algorithm: sequence(oid(OID.ecdsaWithSha256)), digest: 'sha256' };
  }
  if (key.asymmetricKeyType === 'rsa')
    return { algorithm: sequence(oid(OID.sha256WithRsa), nullValue()), digest: 'sha256' };
  throw new DerError(`cannot sign with a ${key.asymmetricKeyType} key`);
}

/** The 4 or 16 bytes of an IPv4 or IPv6 address (text form). */
export function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip)) throw new DerError(`"${ip}" is not an IP address`);
  let text = ip.split('%')[0];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const b = v4[1].split('.').map(Number);
    text = text.slice(0, -v4[1].length) + `${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  const out = Buffer.alloc(16);
  all.forEach((group, i) => out.writeUInt16BE(parseInt(group, 16), i * 2));
  return out;
}

function ipString(bytes: Buffer): string {
  if (bytes.length === 4) return [...bytes].join('.');
  if (bytes.length === 16) return Array.from({ length: 8 }, (_, i) => bytes.readUInt16BE(i * 2).toString(16)).join(':');
  throw new DerError('an IP address in subjectAltName is neither 4 nor 16 bytes');
}
