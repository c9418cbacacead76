/**
 * The project's one DER (X.690) module: the few encodings the cluster PKI uses to build certificates, a
 * bounds-checked reader, and the X.509 fields that the PKI (issuer name, key, extensions) and the SEV-SNP
 * verifier (signature algorithm, AMD's VCEK/VLEK extensions) read.
 *
 * Our own code rather than @peculiar/x509 for speed: that library's JavaScript ASN.1 work costs
 * about 7 ms per kubelet certificate, over ten times the signature, and the join service signs one per joining
 * node (see lib/pki/certificates.ts); the SNP verifier reads a VCEK's extensions on every cold verification,
 * next to signature checks that take well under a millisecond. node:crypto verifies certificates but exposes
 * neither arbitrary extensions nor a way to build them.
 *
 * The reader accepts definite lengths and single-byte tags only (all that X.509 and PKCS#10 use) and throws
 * DerError on anything that runs past its container, so malformed input can never read out of bounds.
 */

export class DerError extends Error {}

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

// ---- encoding

export function tlv(tag: number, ...content: Uint8Array[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.of(tag), encodeLength(body.length), body]);
}

export const sequence = (...content: Uint8Array[]) => tlv(TAG.SEQUENCE, ...content);
export const set = (...content: Uint8Array[]) => tlv(TAG.SET, ...content);
export const octetString = (bytes: Uint8Array) => tlv(TAG.OCTET_STRING, bytes);
export const bool = (value: boolean) => tlv(TAG.BOOLEAN, Buffer.of(value ? 0xff : 0));
export const nullValue = () => tlv(TAG.NULL);
/** A BIT STRING whose last `unusedBits` bits are padding. */
export const bitString = (bytes: Uint8Array, unusedBits = 0) => tlv(TAG.BIT_STRING, Buffer.of(unusedBits), bytes);
export const utf8String = (text: string) => tlv(TAG.UTF8_STRING, Buffer.from(text, 'utf8'));
/** Explicit context tag [n], constructed. */
export const explicit = (n: number, ...content: Uint8Array[]) => tlv(0xa0 | n, ...content);

/** A non-negative INTEGER from big-endian magnitude bytes (leading zeros stripped, a 0x00 added when the top bit is set). */
export function unsignedInteger(magnitude: Uint8Array): Buffer {
  let bytes = Buffer.from(magnitude);
  while (bytes.length > 1 && bytes[0] === 0) bytes = bytes.subarray(1);
  if (bytes.length === 0) bytes = Buffer.of(0);
  if (bytes[0] & 0x80) bytes = Buffer.concat([Buffer.of(0), bytes]);
  return tlv(TAG.INTEGER, bytes);
}

export function oid(dotted: string): Buffer {
  const [first, second, ...rest] = dotted.split('.').map(Number);
  const bytes: number[] = [];
  for (const arc of [40 * first + second, ...rest]) {
    const chunk = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift((v & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return tlv(TAG.OID, Buffer.from(bytes));
}

/** RFC 5280 §4.1.2.5: UTCTime for years through 2049, GeneralizedTime from 2050; seconds, Zulu. */
export function time(date: Date): Buffer {
  const iso = date.toISOString(); // 2024-05-01T12:34:56.789Z
  const rest = iso.slice(5, 7) + iso.slice(8, 10) + iso.slice(11, 13) + iso.slice(14, 16) + iso.slice(17, 19) + 'Z';
  return date.getUTCFullYear() < 2050
    ? tlv(TAG.UTC_TIME, Buffer.from(iso.slice(2, 4) + rest, 'ascii'))
    : tlv(TAG.GENERALIZED_TIME, Buffer.from(iso.slice(0, 4) + rest, 'ascii'));
}

function encodeLength(n: number): Buffer {
  if (n < 0x80) return Buffer.of(n);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

// ---- reading

/** One element: its tag, the whole encoding (`raw`) and its content. */
export interface Element {
  tag: number;
  raw: Buffer;
  content: Buffer;
}

const asBuffer = (bytes: Uint8Array) =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Reads the element at `offset`; `end` bounds it (by default the input's end). Bytes after it are not looked at. */
export function readElement(input: Uint8Array, offset = 0, end = input.length): Element {
  const buf = asBuffer(input);
  if (offset + 2 > end) throw new DerError('truncated element');
  const tag = buf[offset];
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-byte tags are not supported');
  let length = buf[offset + 1];
  let header = 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4) throw new DerError('unsupported length encoding');
    if (offset + 2 + count > end) throw new DerError('truncated length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + buf[offset + 2 + i];
    header += count;
  }
  if (offset + header + length > end) throw new DerError('element runs past its container');
  return {
    tag,
    raw: buf.subarray(offset, offset + header + length),
    content: buf.subarray(offset + header, offset + header + length),
  };
}

/** Reads a whole input as exactly one element of `tag`. */
export function readOnly(input: Uint8Array, tag: number, what: string): Element {
  const element = readElement(input);
  if (element.raw.length !== input.length) throw new DerError(`${what} has trailing bytes`);
  return expectTag(element, tag, what);
}

/** The elements inside a constructed element. */
export function children(element: Element): Element[] {
  const out: Element[] = [];
  for (let offset = 0; offset < element.content.length;) {
    const child = readElement(element.content, offset);
    out.push(child);
    offset += child.raw.length;
  }
  return out;
}

export function expectTag(element: Element | undefined, tag: number, what: string): Element {
  if (!element || element.tag !== tag) throw new DerError(`${what} is missing or has the wrong type`);
  return element;
}

export function decodeOid(element: Element): string {
  expectTag(element, TAG.OID, 'object identifier');
  const bytes = element.content;
  if (bytes.length === 0) throw new DerError('empty object identifier');
  const arcs: number[] = [];
  let value = 0;
  for (const byte of bytes) {
    value = value * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      arcs.push(value);
      value = 0;
    }
  }
  if (bytes[bytes.length - 1] & 0x80) throw new DerError('truncated object identifier');
  const first = arcs.shift()!;
  const top = first < 80 ? Math.floor(first / 40) : 2;
  return [top, first - top * 40, ...arcs].join('.');
}

/** A non-negative INTEGER that fits a JavaScript number (TCB security patch levels, structure versions). */
export function decodeSmallInteger(element: Element): number {
  if (element.tag !== TAG.INTEGER || element.content.length === 0 || element.content.length > 6)
    throw new DerError('expected a small INTEGER');
  if (element.content[0] & 0x80) throw new DerError('expected a non-negative INTEGER');
  let value = 0;
  for (const byte of element.content) value = value * 256 + byte;
  return value;
}

// ---- X.509 certificate fields (RFC 5280 §4.1)

export interface CertificateFields {
  subject: Element;
  /** The SubjectPublicKeyInfo SEQUENCE. */
  publicKey: Element;
  /** The outer signatureAlgorithm AlgorithmIdentifier SEQUENCE. */
  signatureAlgorithm: Element;
  /** extnID -> extnValue (the OCTET STRING's contents). */
  extensions: Map<string, Buffer>;
}

/** The fields of a certificate element (read with readOnly, or readElement where trailing bytes are tolerated). */
export function certificateFields(certificate: Element): CertificateFields {
  const [tbs, signatureAlgorithm] = children(expectTag(certificate, TAG.SEQUENCE, 'certificate'));
  const fields = children(expectTag(tbs, TAG.SEQUENCE, 'tbsCertificate'));
  const base = fields[0]?.tag === 0xa0 ? 1 : 0; // explicit version present
  const extensions = fields.slice(base + 6).find((f) => f.tag === 0xa3);
  return {
    subject: expectTag(fields[base + 4], TAG.SEQUENCE, 'subject'),
    publicKey: expectTag(fields[base + 5], TAG.SEQUENCE, 'subjectPublicKeyInfo'),
    signatureAlgorithm: expectTag(signatureAlgorithm, TAG.SEQUENCE, 'signatureAlgorithm'),
    extensions: extensionsOf(extensions && children(extensions)[0]),
  };
}

/** Extensions (a SEQUENCE of Extension) by OID -> extnValue content. */
export function extensionsOf(extensions: Element | undefined): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  if (!extensions) return out;
  for (const ext of children(expectTag(extensions, TAG.SEQUENCE, 'extensions'))) {
    const parts = children(expectTag(ext, TAG.SEQUENCE, 'extension'));
    out.set(decodeOid(parts[0]), expectTag(parts[parts.length - 1], TAG.OCTET_STRING, 'extnValue').content);
  }
  return out;
}
