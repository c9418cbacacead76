/**
 * The on-disk layout of a file state disk (docs/state-disk.md) and the keys derived from the disk key.
 *
 *   sector 0                      plaintext header: magic, version, flags, UUID, files-slot size, key-check value
 *   sectors 1 .. 2·S              the file area: two slots of S sectors each (./files-area.ts)
 *   sectors 2·S+1 .. end          the data area: read()/write() offset 0 is its first byte
 *
 * Sectors are 4 KiB. Every sector after the header is AES-256-XTS encrypted on its own (./sector-cipher.ts).
 * The header is plaintext on purpose: the UUID must be readable before the key is known.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { StateDiskError } from './types.js';

export const SECTOR_SIZE = 4096;
export const DISK_KEY_LENGTH = 32;
const MAGIC = Buffer.from('CONSTELLATION-SD', 'ascii');
const FORMAT_VERSION = 1;
const FLAG_FORMATTED = 1;
/** Each of the two file-area slots is at most 1 MiB (smaller on very small disks). */
const MAX_FILES_SLOT_SECTORS = 256;
/** Header, two one-sector slots, one data sector. */
export const MIN_DISK_SECTORS = 4;

const KEY_CHECK_LABEL = 'constellation-state-disk-check';
const XTS_KEY_INFO = 'constellation-state-disk-xts';
const FILES_MAC_KEY_INFO = 'constellation-state-disk-files-mac';

// Header field offsets. Bytes after HEADER_END are zero.
const OFF_VERSION = 16;
const OFF_FLAGS = 18;
const OFF_SECTOR_SIZE = 20;
const OFF_UUID = 24;
const OFF_SLOT_SECTORS = 40;
const OFF_KEY_CHECK = 48;
const OFF_CHECKSUM = 80;
const HEADER_END = 112;

export interface DiskHeader {
  uuid: string;
  formatted: boolean;
  /** Sectors per file-area slot. */
  filesSlotSectors: number;
  /** HMAC-SHA256(diskKey, "constellation-state-disk-check"); zeros while not formatted. */
  keyCheck: Uint8Array;
}

/** Where the regions of a disk with `header` and `totalSectors` start, in sectors. */
export function regions(header: DiskHeader, totalSectors: number) {
  const filesStart = 1;
  const dataStart = filesStart + 2 * header.filesSlotSectors;
  return { filesStart, dataStart, dataSectors: totalSectors - dataStart };
}

/** The header a blank disk of `totalSectors` gets on first open. */
export function newHeader(uuid: string, totalSectors: number): DiskHeader {
  const filesSlotSectors = Math.max(1, Math.min(MAX_FILES_SLOT_SECTORS, Math.floor((totalSectors - 1) / 8)));
  return { uuid, formatted: false, filesSlotSectors, keyCheck: new Uint8Array(32) };
}

export function encodeHeader(header: DiskHeader): Buffer {
  const sector = Buffer.alloc(SECTOR_SIZE);
  MAGIC.copy(sector, 0);
  sector.writeUInt16BE(FORMAT_VERSION, OFF_VERSION);
  sector.writeUInt16BE(header.formatted ? FLAG_FORMATTED : 0, OFF_FLAGS);
  sector.writeUInt32BE(SECTOR_SIZE, OFF_SECTOR_SIZE);
  Buffer.from(header.uuid.replace(/-/g, ''), 'hex').copy(sector, OFF_UUID);
  sector.writeUInt32BE(header.filesSlotSectors, OFF_SLOT_SECTORS);
  Buffer.from(header.keyCheck).copy(sector, OFF_KEY_CHECK);
  checksum(sector).copy(sector, OFF_CHECKSUM);
  return sector;
}

/** The header in sector 0, or undefined for a blank (all-zero) sector. Anything else is refused, never overwritten. */
export function decodeHeader(sector: Buffer, file: string): DiskHeader | undefined {
  if (isZero(sector)) return undefined;
  if (!sector.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new StateDiskError(`${file} is not a Constellation state disk: it is not blank and has no state-disk header.`, {
      hint: 'Its data was left untouched. Point the node at its own state-disk file, or delete this file if it holds nothing you need.',
    });
  }
  if (!checksum(sector).equals(sector.subarray(OFF_CHECKSUM, HEADER_END))) {
    throw new StateDiskError(`The state-disk header of ${file} is damaged (checksum mismatch).`, {
      hint: 'The disk cannot be unlocked safely; replace the node so that it gets a new state disk.',
    });
  }
  const version = sector.readUInt16BE(OFF_VERSION);
  if (version !== FORMAT_VERSION || sector.readUInt32BE(OFF_SECTOR_SIZE) !== SECTOR_SIZE) {
    throw new StateDiskError(`${file} has state-disk format version ${version}, which this bootstrapper does not read.`, {
      hint: 'Use a node image whose bootstrapper matches the disk, or replace the node.',
    });
  }
  const hex = sector.subarray(OFF_UUID, OFF_UUID + 16).toString('hex');
  return {
    uuid: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
    formatted: (sector.readUInt16BE(OFF_FLAGS) & FLAG_FORMATTED) !== 0,
    filesSlotSectors: sector.readUInt32BE(OFF_SLOT_SECTORS),
    keyCheck: new Uint8Array(sector.subarray(OFF_KEY_CHECK, OFF_KEY_CHECK + 32)),
  };
}

export function checkKeyLength(key: Uint8Array): void {
  if (key.length !== DISK_KEY_LENGTH) {
    throw new StateDiskError(`A state-disk key has ${DISK_KEY_LENGTH} bytes, this one has ${key.length}.`);
  }
}

export function keyCheckValue(key: Uint8Array): Uint8Array {
  return new Uint8Array(createHmac('sha256', key).update(KEY_CHECK_LABEL).digest());
}

export function keyMatches(header: DiskHeader, key: Uint8Array): boolean {
  return timingSafeEqual(keyCheckValue(key), header.keyCheck);
}

/** The 64-byte AES-256-XTS key (two AES keys). */
export function xtsKey(diskKey: Uint8Array): Buffer {
  return hkdfExpand(diskKey, XTS_KEY_INFO, 64);
}

/** The key of the file area's HMAC. */
export function filesMacKey(diskKey: Uint8Array): Buffer {
  return hkdfExpand(diskKey, FILES_MAC_KEY_INFO, 32);
}

/**
 * HKDF-Expand (RFC 5869 §2.3) with SHA-256. The disk key is already a uniformly random HKDF output, so it is used as
 * the pseudorandom key directly; node:crypto only offers extract-and-expand, hence these few lines.
 */
function hkdfExpand(prk: Uint8Array, info: string, length: number): Buffer {
  const blocks: Buffer[] = [];
  let previous = Buffer.alloc(0);
  for (let i = 1; blocks.length * 32 < length; i++) {
    previous = createHmac('sha256', prk).update(previous).update(info, 'utf8').update(Buffer.of(i)).digest();
    blocks.push(previous);
  }
  return Buffer.concat(blocks).subarray(0, length);
}

const ZERO_SECTOR = Buffer.alloc(SECTOR_SIZE);

/** True if `bytes` (at most one sector) are all zero. */
export function isZero(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).equals(ZERO_SECTOR.subarray(0, bytes.byteLength));
}

function checksum(sector: Buffer): Buffer {
  return createHash('sha256').update(sector.subarray(0, OFF_CHECKSUM)).digest();
}
