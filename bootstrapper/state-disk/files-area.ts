/**
 * The state disk's small file area: named files the bootstrapper keeps on the encrypted disk (and tests read back).
 * Written by us because it is a few dozen lines and no library stores named blobs inside an encrypted block range.
 *
 * All files are kept together in one slot image; there are two slots, and each write of the file area writes the
 * whole image with the next generation number into the slot the previous generation does not occupy
 * (generation g goes to slot g mod 2). A crash while writing leaves the older slot intact, so the disk holds the old
 * or the new set of files, never a mix. A slot image (plaintext, before the sector encryption):
 *
 *   0  magic "CSFA"   4  version u16 (1)   6  zero u16   8  generation u64   16  payload length u32   20  zeros
 *   32 HMAC-SHA256(filesMacKey, bytes 0..32 ‖ payload)
 *   64 payload: per file  name length u16, name (UTF-8), data length u32, data
 *
 * The HMAC makes the file area tamper-evident (XTS alone is not); an all-zero slot is an unwritten one.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isZero, SECTOR_SIZE } from './layout.js';
import { StateDiskError } from './types.js';

const MAGIC = Buffer.from('CSFA', 'ascii');
const VERSION = 1;
const HEADER_SIZE = 64;
const MAC_OFFSET = 32;
const MAX_NAME_BYTES = 255;

export type Files = Map<string, Uint8Array>;

export type SlotImage = { state: 'empty' } | { state: 'invalid' } | { state: 'valid'; generation: number; files: Files };

/** The plaintext image of a slot holding `files`, padded to whole sectors. Throws if it does not fit `slotBytes`. */
export function encodeSlot(files: Files, generation: number, macKey: Uint8Array, slotBytes: number): Buffer {
  const parts: Buffer[] = [];
  for (const [name, data] of files) {
    const nameBytes = Buffer.from(name, 'utf8');
    const nameLength = Buffer.alloc(2);
    nameLength.writeUInt16BE(nameBytes.length, 0);
    const dataLength = Buffer.alloc(4);
    dataLength.writeUInt32BE(data.length, 0);
    parts.push(nameLength, nameBytes, dataLength, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }
  const payload = Buffer.concat(parts);
  if (HEADER_SIZE + payload.length > slotBytes) {
    throw new StateDiskError(
      `The state disk's file area is full: the files need ${HEADER_SIZE + payload.length} bytes, it holds ${slotBytes}.`,
      { hint: 'Keep large data in the data area (read/write), not in named files.' },
    );
  }
  const image = Buffer.alloc(Math.ceil((HEADER_SIZE + payload.length) / SECTOR_SIZE) * SECTOR_SIZE);
  MAGIC.copy(image, 0);
  image.writeUInt16BE(VERSION, 4);
  image.writeBigUInt64BE(BigInt(generation), 8);
  image.writeUInt32BE(payload.length, 16);
  payload.copy(image, HEADER_SIZE);
  mac(macKey, image, payload).copy(image, MAC_OFFSET);
  return image;
}

/** Reads a decrypted slot. */
export function decodeSlot(image: Buffer, macKey: Uint8Array): SlotImage {
  if (isZero(image.subarray(0, HEADER_SIZE))) return { state: 'empty' };
  if (!image.subarray(0, 4).equals(MAGIC) || image.readUInt16BE(4) !== VERSION) return { state: 'invalid' };
  const length = image.readUInt32BE(16);
  if (HEADER_SIZE + length > image.length) return { state: 'invalid' };
  const payload = image.subarray(HEADER_SIZE, HEADER_SIZE + length);
  if (!timingSafeEqual(mac(macKey, image, payload), image.subarray(MAC_OFFSET, HEADER_SIZE))) return { state: 'invalid' };
  const files: Files = new Map();
  let at = 0;
  while (at < payload.length) {
    const nameLength = payload.readUInt16BE(at);
    const name = payload.subarray(at + 2, at + 2 + nameLength).toString('utf8');
    const dataLength = payload.readUInt32BE(at + 2 + nameLength);
    const start = at + 6 + nameLength;
    files.set(name, new Uint8Array(payload.subarray(start, start + dataLength)));
    at = start + dataLength;
  }
  return { state: 'valid', generation: Number(image.readBigUInt64BE(8)), files };
}

/**
 * The current files of a disk from its two decrypted slots: the valid slot with the higher generation. One invalid
 * slot next to a valid or empty one is a write cut short by a crash; two invalid slots are damage or tampering.
 */
export function currentFiles(slots: [SlotImage, SlotImage], where: string): { generation: number; files: Files } {
  const valid = slots.filter((s): s is Extract<SlotImage, { state: 'valid' }> => s.state === 'valid');
  if (valid.length === 0 && slots.every((s) => s.state === 'invalid')) {
    throw new StateDiskError(`The file area of state disk ${where} is damaged: neither of its two copies verifies.`, {
      hint: 'The disk was modified outside the bootstrapper. Replace the node so that it gets a new state disk.',
    });
  }
  const newest = valid.sort((a, b) => b.generation - a.generation)[0];
  return newest ? { generation: newest.generation, files: newest.files } : { generation: 0, files: new Map() };
}

export function checkFileName(name: string): void {
  const length = Buffer.byteLength(name, 'utf8');
  if (length === 0 || length > MAX_NAME_BYTES) {
    throw new StateDiskError(`A state-disk file name has 1 to ${MAX_NAME_BYTES} bytes; "${name.slice(0, 40)}" has ${length}.`);
  }
}

function mac(key: Uint8Array, image: Buffer, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(image.subarray(0, MAC_OFFSET)).update(payload).digest();
}
