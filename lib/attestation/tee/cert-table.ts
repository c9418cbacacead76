/**
 * The certificate table that comes with an extended SEV-SNP report (the GHCB "certificate blob": /dev/sev-guest's
 * SNP_GET_EXT_REPORT certs buffer, configfs-tsm's auxblob): entries of GUID (16 bytes, little-endian fields),
 * offset and length (u32 LE, relative to the table's start), ended by an all-zero entry; the DER certificates follow.
 * The GUIDs are AMD's (SEV-SNP firmware ABI, "Extended Guest Request"): VCEK, VLEK, ASK, ARK.
 */
import { UserError } from '../../errors.js';

export const CERT_GUIDS = {
  vcek: '63da758d-e664-4564-adc5-f4b93be8accd',
  vlek: 'a8074bc2-a25a-483e-aae6-39c045a0b8a1',
  ask: '4ab7b379-bbac-4fe4-a02f-05aef327c782',
  ark: 'c0b406a4-a803-4952-9743-3fb6014cd0ae',
} as const;

export type SnpCertKind = keyof typeof CERT_GUIDS;
export type SnpCerts = Partial<Record<SnpCertKind, Uint8Array>>;

const ENTRY_SIZE = 24;

/** GUID text → its 16 bytes as stored (the first three fields little-endian, as EFI GUIDs are). */
function guidBytes(guid: string): Buffer {
  const hex = guid.replace(/-/g, '');
  const b = Buffer.from(hex, 'hex');
  const swap = (start: number, len: number) => b.subarray(start, start + len).reverse();
  swap(0, 4);
  swap(4, 2);
  swap(6, 2);
  return b;
}

/** The certificates of a table by kind (unknown GUIDs are skipped). */
export function parseCertTable(table: Uint8Array): SnpCerts {
  const buf = Buffer.from(table.buffer, table.byteOffset, table.length);
  const kinds = Object.entries(CERT_GUIDS).map(([kind, guid]) => ({
    kind: kind as SnpCertKind,
    bytes: guidBytes(guid),
  }));
  const out: SnpCerts = {};
  for (let at = 0; at + ENTRY_SIZE <= buf.length; at += ENTRY_SIZE) {
    const guid = buf.subarray(at, at + 16);
    const offset = buf.readUInt32LE(at + 16);
    const length = buf.readUInt32LE(at + 20);
    if (guid.every((x) => x === 0) && offset === 0 && length === 0) return out;
    if (offset + length > buf.length)
      throw new UserError(
        `The SEV-SNP certificate table is malformed: an entry points past its end (${offset}+${length} > ${buf.length}).`,
      );
    const kind = kinds.find((k) => k.bytes.equals(guid))?.kind;
    if (kind) out[kind] = new Uint8Array(buf.subarray(offset, offset + length));
  }
  throw new UserError('The SEV-SNP certificate table has no terminating entry.');
}

/** A table holding `certs` (what a hypervisor hands the guest; tests and the cloud-in-a-box platform use it). */
export function encodeCertTable(certs: SnpCerts): Uint8Array {
  const entries = (Object.keys(CERT_GUIDS) as SnpCertKind[]).filter((k) => certs[k]);
  let offset = (entries.length + 1) * ENTRY_SIZE;
  const head = Buffer.alloc(offset);
  entries.forEach((kind, i) => {
    guidBytes(CERT_GUIDS[kind]).copy(head, i * ENTRY_SIZE);
    head.writeUInt32LE(offset, i * ENTRY_SIZE + 16);
    head.writeUInt32LE(certs[kind]!.length, i * ENTRY_SIZE + 20);
    offset += certs[kind]!.length;
  });
  return new Uint8Array(Buffer.concat([head, ...entries.map((k) => Buffer.from(certs[k]!))]));
}
