/**
 * Reads a state disk's LUKS header without starting cryptsetup, for the node program's start
 * (docs/workflows/node-images.md, "The node program's start in the VM"): a node opens its state disk before it
 * listens, and in a VM without KVM the first cryptsetup of a boot took 0.4 s there, because QEMU translates
 * cryptsetup and its libraries (libcryptsetup, libcrypto, libdevmapper, libjson-c, libblkid, ...) on their first
 * execution.
 *
 * Deciding "not formatted" wrongly would make the node format a disk that holds its state, so this module answers
 * only where its answer is certainly cryptsetup's (`cryptsetup isLuks` and `luksUUID`, which load the header as
 * libcryptsetup's crypt_load does), and otherwise says `unsure`, and the caller asks cryptsetup:
 *
 *   blank      no LUKS magic at offset 0 ("LUKS\xba\xbe") and no LUKS2 secondary header's magic ("SKUL\xba\xbe")
 *              at any offset LUKS2 allows for it (16 KiB, 32 KiB, ... 4 MiB): cryptsetup finds no header either.
 *   luks2      a LUKS2 primary header at 0 whose checksum (over the binary header and its JSON area) is right,
 *              whose JSON area parses, whose UUID field (offset 168, 40 bytes) is a UUID, and that fits the device
 *              with its key slots: a header cryptsetup wrote, which it loads (it prefers the secondary copy only
 *              when that is intact and newer, the one case where the two could name different UUIDs: `unsure`).
 *   unsure     anything else: a LUKS1 header (its loading checks more than this module would), a damaged or
 *              unknown primary, only a secondary copy, an unreadable device.
 *
 * The LUKS2 on-disk format: https://gitlab.com/cryptsetup/LUKS2-docs (binary header: magic, version u16, hdr_size
 * u64, seqid u64, label, checksum_alg, salt, uuid, subsystem, hdr_offset u64, padding, csum; all big-endian).
 */
import { createHash, getHashes } from 'node:crypto';
import { promises as fs } from 'node:fs';

export type LuksHeaderReading = { kind: 'blank' } | { kind: 'luks2'; uuid: string } | { kind: 'unsure' };

const MAGIC_PRIMARY = Buffer.from('LUKS\xba\xbe', 'latin1');
const MAGIC_SECONDARY = Buffer.from('SKUL\xba\xbe', 'latin1');
/** The binary header's size; the JSON area follows it, up to hdr_size. */
const BINARY_HEADER = 4096;
/** Where a LUKS2 secondary header may start (its offset is the primary's hdr_size, one of these). */
const SECONDARY_OFFSETS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096].map((kib) => kib * 1024);

const FIELD = {
  version: 6,
  hdrSize: 8,
  seqid: 16,
  checksumAlg: 72,
  uuid: 168,
  hdrOffset: 256,
  csum: 448,
} as const;
const CHECKSUM_ALG_BYTES = 32;
const UUID_BYTES = 40;
const CSUM_BYTES = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the device's LUKS header says, where that is certain (see the module header). */
export async function readLuksHeader(device: string): Promise<LuksHeaderReading> {
  let file: fs.FileHandle;
  try {
    file = await fs.open(device, 'r');
  } catch {
    return { kind: 'unsure' };
  }
  try {
    const read = async (offset: number, length: number) => {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await file.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    };
    const primary = await read(0, BINARY_HEADER);
    if (!startsWith(primary, MAGIC_PRIMARY)) {
      for (const offset of SECONDARY_OFFSETS)
        if (startsWith(await read(offset, MAGIC_SECONDARY.length), MAGIC_SECONDARY)) return { kind: 'unsure' };
      return { kind: 'blank' };
    }
    const first = await intactLuks2Header(primary, 0, read);
    if (!first) return { kind: 'unsure' };
    const second = await intactLuks2Header(await read(first.hdrSize, BINARY_HEADER), first.hdrSize, read);
    if (second && second.seqid > first.seqid && second.uuid !== first.uuid) return { kind: 'unsure' };
    return { kind: 'luks2', uuid: first.uuid.toLowerCase() };
  } catch {
    return { kind: 'unsure' };
  } finally {
    await file.close();
  }
}

interface IntactHeader {
  hdrSize: number;
  seqid: bigint;
  uuid: string;
}

/**
 * A LUKS2 binary header at `offset` (0: the primary, else the secondary) with a right checksum and a UUID, or
 * undefined. The checksum covers the binary header (its csum field zeroed) and the JSON area after it.
 */
async function intactLuks2Header(
  header: Buffer,
  offset: number,
  read: (offset: number, length: number) => Promise<Buffer>,
): Promise<IntactHeader | undefined> {
  if (header.length < BINARY_HEADER) return undefined;
  if (!startsWith(header, offset === 0 ? MAGIC_PRIMARY : MAGIC_SECONDARY)) return undefined;
  if (header.readUInt16BE(FIELD.version) !== 2) return undefined;
  const hdrSize = Number(header.readBigUInt64BE(FIELD.hdrSize));
  if (!SECONDARY_OFFSETS.includes(hdrSize)) return undefined;
  if (header.readBigUInt64BE(FIELD.hdrOffset) !== BigInt(offset)) return undefined;
  const algorithm = text(header, FIELD.checksumAlg, CHECKSUM_ALG_BYTES);
  if (!getHashes().includes(algorithm)) return undefined;
  const uuid = text(header, FIELD.uuid, UUID_BYTES);
  if (!UUID.test(uuid)) return undefined;
  const json = await read(offset + BINARY_HEADER, hdrSize - BINARY_HEADER);
  if (json.length !== hdrSize - BINARY_HEADER) return undefined;
  const zeroed = Buffer.from(header);
  zeroed.fill(0, FIELD.csum, FIELD.csum + CSUM_BYTES);
  const digest = createHash(algorithm).update(zeroed).update(json).digest();
  if (digest.length > CSUM_BYTES) return undefined;
  const stored = header.subarray(FIELD.csum, FIELD.csum + CSUM_BYTES);
  if (!stored.subarray(0, digest.length).equals(digest)) return undefined;
  if (stored.subarray(digest.length).some((byte) => byte !== 0)) return undefined;
  // cryptsetup then parses the JSON area and checks that the device holds both headers and the key slots' area.
  const metadata = parseJsonArea(json);
  const keyslotsSize = Number(metadata?.config?.keyslots_size);
  if (!metadata || !Number.isSafeInteger(keyslotsSize) || keyslotsSize < 0) return undefined;
  if ((await read(2 * hdrSize + keyslotsSize - 1, 1)).length !== 1) return undefined;
  return { hdrSize, seqid: header.readBigUInt64BE(FIELD.seqid), uuid };
}

/** The JSON area's object (NUL-padded), if it is one with the sections every LUKS2 header has. */
function parseJsonArea(json: Buffer): { config?: { keyslots_size?: unknown } } | undefined {
  const end = json.indexOf(0);
  try {
    const value: unknown = JSON.parse(json.subarray(0, end < 0 ? json.length : end).toString('utf8'));
    if (typeof value !== 'object' || value === null) return undefined;
    for (const section of ['keyslots', 'tokens', 'segments', 'digests', 'config'])
      if (typeof (value as Record<string, unknown>)[section] !== 'object') return undefined;
    return value as { config?: { keyslots_size?: unknown } };
  } catch {
    return undefined;
  }
}

function startsWith(bytes: Buffer, magic: Buffer): boolean {
  return bytes.length >= magic.length && bytes.subarray(0, magic.length).equals(magic);
}

/** A NUL-terminated string field. */
function text(header: Buffer, offset: number, length: number): string {
  const field = header.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? length : end).toString('latin1');
}
