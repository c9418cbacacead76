/**
 * A minimal, bounds-checked DER reader: just enough to pull the signature algorithm and the extensions out of
 * an X.509 certificate. node:crypto's X509Certificate verifies signatures but does not expose arbitrary
 * extensions (AMD's TCB and hardware-id extensions), and @peculiar/x509 cannot be loaded without a global
 * reflect-metadata polyfill that this package does not ship, so we read the few fields we need ourselves.
 */

export class DerError extends Error {}

export interface DerNode {
  tag: number;
  /** The whole TLV. */
  bytes: Uint8Array;
  /** The value (contents) only. */
  content: Uint8Array;
}

/** Reads the TLV at `offset`; throws DerError when it is truncated or uses an indefinite length. */
export function readDer(buf: Uint8Array, offset = 0): DerNode {
  if (offset + 2 > buf.length) throw new DerError('truncated DER');
  const tag = buf[offset];
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-byte DER tags are not supported');
  let pos = offset + 1;
  let length = buf[pos++];
  if (length & 0x80) {
    const n = length & 0x7f;
    if (n === 0 || n > 4) throw new DerError('unsupported DER length');
    if (pos + n > buf.length) throw new DerError('truncated DER');
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + buf[pos++];
  }
  if (pos + length > buf.length) throw new DerError('truncated DER');
  return { tag, bytes: buf.subarray(offset, pos + length), content: buf.subarray(pos, pos + length) };
}

/** The TLVs inside a constructed node. */
export function derChildren(node: DerNode): DerNode[] {
  const out: DerNode[] = [];
  let pos = 0;
  while (pos < node.content.length) {
    const child = readDer(node.content, pos);
    out.push(child);
    pos += child.bytes.length;
  }
  return out;
}

export function decodeOid(content: Uint8Array): string {
  if (content.length === 0) throw new DerError('empty OID');
  const parts: number[] = [];
  let value = 0;
  for (const b of content) {
    value = value * 128 + (b & 0x7f);
    if (!(b & 0x80)) {
      if (parts.length === 0) parts.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
      else parts.push(value);
      value = 0;
    }
  }
  return parts.join('.');
}

/** A non-negative DER INTEGER that fits a JavaScript number (TCB security patch levels, structure versions). */
export function decodeSmallInteger(node: DerNode): number {
  if (node.tag !== 0x02 || node.content.length === 0 || node.content.length > 6) throw new DerError('expected a small INTEGER');
  if (node.content[0] & 0x80) throw new DerError('expected a non-negative INTEGER');
  let v = 0;
  for (const b of node.content) v = v * 256 + b;
  return v;
}

export interface CertificateFields {
  /** OID of the outer signatureAlgorithm, and for RSASSA-PSS the OID of its hash. */
  signatureAlgorithm: string;
  signatureHash?: string;
  /** extnID -> extnValue (the OCTET STRING's contents). */
  extensions: Map<string, Uint8Array>;
}

const RSASSA_PSS = '1.2.840.113549.1.1.10';

/** Reads the signature algorithm and the extensions of a DER certificate. */
export function readCertificateFields(der: Uint8Array): CertificateFields {
  const [tbs, sigAlg] = derChildren(readDer(der));
  if (!tbs || !sigAlg) throw new DerError('not an X.509 certificate');
  const [algOid, params] = derChildren(sigAlg);
  const signatureAlgorithm = decodeOid(algOid.content);
  let signatureHash: string | undefined;
  if (signatureAlgorithm === RSASSA_PSS && params && params.tag === 0x30) {
    const hashField = derChildren(params).find((n) => n.tag === 0xa0);
    // Absent hashAlgorithm means SHA-1 (RFC 4055), which we report as such so callers refuse it.
    signatureHash = hashField ? decodeOid(derChildren(derChildren(hashField)[0])[0].content) : '1.3.14.3.2.26';
  }
  const extensions = new Map<string, Uint8Array>();
  const extField = derChildren(tbs).find((n) => n.tag === 0xa3);
  if (extField) {
    for (const ext of derChildren(derChildren(extField)[0])) {
      const fields = derChildren(ext);
      const id = decodeOid(fields[0].content);
      const value = fields[fields.length - 1];
      if (value.tag !== 0x04) throw new DerError(`extension ${id} has no OCTET STRING value`);
      extensions.set(id, value.content);
    }
  }
  return { signatureAlgorithm, signatureHash, extensions };
}

export const OID = {
  rsassaPss: RSASSA_PSS,
  sha384: '2.16.840.1.101.3.4.2.2',
} as const;
