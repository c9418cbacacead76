/**
 * The read side of a node image's raw disk: find the EFI system partition in the GPT (UEFI specification 2.10,
 * §5.3) and read \EFI\BOOT\BOOTX64.EFI (the removable-media boot path firmware falls back to, and the one file
 * a node image boots) from its FAT12/16/32 file system (Microsoft "FAT: General Overview of On-Disk Format"), as
 * mkfs.vfat and mtools make them. `image measure` uses it to predict measurements from the disk alone
 * (docs/measured-boot.md).
 *
 * Our own code, read-only and in memory: the npm FAT packages (fatfs, ...) are unmaintained and want a block-device
 * driver; we need one lookup on a buffer. The disk is untrusted input: every offset is bounds-checked, cluster
 * chains are bounded, and a bad disk is a UserError naming what is wrong.
 */
import { UserError } from '../errors.js';

const GPT_SIGNATURE = 'EFI PART';
/** C12A7328-F81F-11D2-BA4B-00A0C93EC93B as stored on disk (first three fields little-endian). */
const ESP_TYPE_GUID = Buffer.from('28732ac11ff8d211ba4b00a0c93ec93b', 'hex');
export const BOOT_FILE_PATH = ['EFI', 'BOOT', 'BOOTX64.EFI'] as const;

export class DiskImageError extends UserError {
  constructor(message: string) {
    super(message, {
      hint: 'Pass the raw disk `image build` writes (a GPT disk whose EFI system partition holds \\EFI\\BOOT\\BOOTX64.EFI).',
    });
  }
}

function need(buf: Buffer, offset: number, length: number, what: string): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || length < 0 || offset + length > buf.length) {
    throw new DiskImageError(`damaged disk image: ${what} lies outside the file`);
  }
}

/** The GPT header's sector size (512 or 4096), or undefined when the bytes are no GPT disk. */
function gptSectorSize(disk: Buffer): number | undefined {
  for (const size of [512, 4096]) {
    if (disk.length >= size + 92 && disk.toString('latin1', size, size + 8) === GPT_SIGNATURE) return size;
  }
  return undefined;
}

export function looksLikeGptDisk(disk: Buffer): boolean {
  return gptSectorSize(disk) !== undefined;
}

export interface GptPartition {
  /** 1-based partition number. */
  number: number;
  typeGuid: Buffer;
  firstLba: number;
  lastLba: number;
  name: string;
}

export function gptPartitions(disk: Buffer): { sectorSize: number; partitions: GptPartition[] } {
  const sectorSize = gptSectorSize(disk);
  if (sectorSize === undefined) throw new DiskImageError('not a GPT disk: no "EFI PART" header at LBA 1');
  const h = sectorSize;
  const entriesLba = Number(disk.readBigUInt64LE(h + 72));
  const count = disk.readUInt32LE(h + 80);
  const entrySize = disk.readUInt32LE(h + 84);
  if (entrySize < 128 || count > 1024) throw new DiskImageError('damaged GPT: implausible partition entry array');
  need(disk, entriesLba * sectorSize, count * entrySize, 'the GPT partition entries');
  const partitions: GptPartition[] = [];
  for (let i = 0; i < count; i++) {
    const e = entriesLba * sectorSize + i * entrySize;
    const typeGuid = disk.subarray(e, e + 16);
    if (typeGuid.every((b) => b === 0)) continue;
    const name = disk
      .subarray(e + 56, e + 128)
      .toString('utf16le')
      .replace(/\0.*$/s, '');
    partitions.push({
      number: i + 1,
      typeGuid,
      firstLba: Number(disk.readBigUInt64LE(e + 32)),
      lastLba: Number(disk.readBigUInt64LE(e + 40)),
      name,
    });
  }
  return { sectorSize, partitions };
}

interface DirEntry {
  name: string;
  isDirectory: boolean;
  cluster: number;
  size: number;
}

/** A read-only FAT12/16/32 file system on a buffer holding just the partition. */
class FatVolume {
  private readonly bytesPerSector: number;
  private readonly clusterBytes: number;
  private readonly fatOffset: number;
  private readonly rootDirOffset: number;
  private readonly rootDirBytes: number;
  private readonly dataOffset: number;
  private readonly clusterCount: number;
  readonly type: 12 | 16 | 32;
  private readonly rootCluster: number;

  constructor(private readonly fs: Buffer) {
    need(fs, 0, 512, 'the FAT boot sector');
    if (fs.readUInt16LE(510) !== 0xaa55)
      throw new DiskImageError('the EFI system partition holds no FAT file system (no boot signature)');
    this.bytesPerSector = fs.readUInt16LE(11);
    const sectorsPerCluster = fs.readUInt8(13);
    const reserved = fs.readUInt16LE(14);
    const fats = fs.readUInt8(16);
    const rootEntries = fs.readUInt16LE(17);
    const totalSectors = fs.readUInt16LE(19) || fs.readUInt32LE(32);
    const fatSectors = fs.readUInt16LE(22) || fs.readUInt32LE(36);
    if (
      ![512, 1024, 2048, 4096].includes(this.bytesPerSector) ||
      sectorsPerCluster === 0 ||
      fats === 0 ||
      fatSectors === 0
    ) {
      throw new DiskImageError('the EFI system partition holds no valid FAT file system');
    }
    this.clusterBytes = sectorsPerCluster * this.bytesPerSector;
    const rootDirSectors = Math.ceil((rootEntries * 32) / this.bytesPerSector);
    this.fatOffset = reserved * this.bytesPerSector;
    this.rootDirOffset = (reserved + fats * fatSectors) * this.bytesPerSector;
    this.rootDirBytes = rootDirSectors * this.bytesPerSector;
    this.dataOffset = this.rootDirOffset + this.rootDirBytes;
    this.clusterCount = Math.floor((totalSectors - reserved - fats * fatSectors - rootDirSectors) / sectorsPerCluster);
    this.type = this.clusterCount < 4085 ? 12 : this.clusterCount < 65525 ? 16 : 32;
    this.rootCluster = this.type === 32 ? fs.readUInt32LE(44) : 0;
  }

  private next(cluster: number): number {
    if (this.type === 12) {
      const at = this.fatOffset + Math.floor(cluster * 1.5);
      need(this.fs, at, 2, 'the FAT');
      const v = this.fs.readUInt16LE(at);
      return cluster % 2 === 0 ? v & 0xfff : v >> 4;
    }
    if (this.type === 16) {
      need(this.fs, this.fatOffset + cluster * 2, 2, 'the FAT');
      return this.fs.readUInt16LE(this.fatOffset + cluster * 2);
    }
    need(this.fs, this.fatOffset + cluster * 4, 4, 'the FAT');
    return this.fs.readUInt32LE(this.fatOffset + cluster * 4) & 0x0fffffff;
  }

  private isEnd(cluster: number): boolean {
    return cluster >= (this.type === 12 ? 0xff8 : this.type === 16 ? 0xfff8 : 0x0ffffff8);
  }

  /** The bytes of a cluster chain (whole clusters). */
  private chain(first: number, maxBytes = Infinity): Buffer {
    const parts: Buffer[] = [];
    let total = 0;
    for (let c = first, steps = 0; !this.isEnd(c) && total < maxBytes; c = this.next(c), steps++) {
      if (c < 2 || c >= this.clusterCount + 2 || steps > this.clusterCount)
        throw new DiskImageError('damaged FAT file system: bad cluster chain');
      const at = this.dataOffset + (c - 2) * this.clusterBytes;
      need(this.fs, at, this.clusterBytes, 'a FAT cluster');
      parts.push(this.fs.subarray(at, at + this.clusterBytes));
      total += this.clusterBytes;
    }
    return Buffer.concat(parts);
  }

  root(): DirEntry[] {
    if (this.type === 32) return this.entries(this.chain(this.rootCluster));
    need(this.fs, this.rootDirOffset, this.rootDirBytes, 'the FAT root directory');
    return this.entries(this.fs.subarray(this.rootDirOffset, this.rootDirOffset + this.rootDirBytes));
  }

  list(dir: DirEntry): DirEntry[] {
    return this.entries(this.chain(dir.cluster));
  }

  read(file: DirEntry): Buffer {
    if (file.size === 0) return Buffer.alloc(0);
    const data = this.chain(file.cluster, file.size);
    if (data.length < file.size) throw new DiskImageError('damaged FAT file system: a file is shorter than its size');
    return data.subarray(0, file.size);
  }

  /** Directory entries with long names where present (VFAT), else the 8.3 short name. */
  private entries(dir: Buffer): DirEntry[] {
    const out: DirEntry[] = [];
    let lfn: string[] = [];
    for (let at = 0; at + 32 <= dir.length; at += 32) {
      const first = dir[at]!;
      if (first === 0x00) break;
      const attr = dir[at + 11]!;
      if (first === 0xe5) {
        lfn = [];
        continue;
      }
      if (attr === 0x0f) {
        const part = Buffer.concat([
          dir.subarray(at + 1, at + 11),
          dir.subarray(at + 14, at + 26),
          dir.subarray(at + 28, at + 32),
        ]);
        const text = part.toString('utf16le').replace(/\0[\s\S]*$/, '');
        if (first & 0x40) lfn = [];
        lfn.unshift(text);
        continue;
      }
      if (attr & 0x08) {
        lfn = [];
        continue;
      }
      const base = dir.toString('latin1', at, at + 8).trimEnd();
      const ext = dir.toString('latin1', at + 8, at + 11).trimEnd();
      const shortName = (first === 0x05 ? '\xe5' + base.slice(1) : base) + (ext ? `.${ext}` : '');
      const cluster = (this.type === 32 ? dir.readUInt16LE(at + 20) << 16 : 0) | dir.readUInt16LE(at + 26);
      out.push({
        name: lfn.length > 0 ? lfn.join('') : shortName,
        isDirectory: (attr & 0x10) !== 0,
        cluster,
        size: dir.readUInt32LE(at + 28),
      });
      lfn = [];
    }
    return out;
  }
}

/** Reads a file at `segments` (case-insensitive, as FAT compares names) from a FAT file system's bytes. */
export function readFatFile(fs: Buffer, segments: readonly string[]): Buffer | undefined {
  const volume = new FatVolume(fs);
  let entries = volume.root();
  for (let i = 0; i < segments.length; i++) {
    const entry = entries.find((e) => e.name.toUpperCase() === segments[i]!.toUpperCase());
    if (!entry) return undefined;
    if (i === segments.length - 1) return entry.isDirectory ? undefined : volume.read(entry);
    if (!entry.isDirectory) return undefined;
    entries = volume.list(entry);
  }
  return undefined;
}

/** The FAT type (12, 16 or 32) of a file system's bytes. */
export function fatType(fs: Buffer): 12 | 16 | 32 {
  return new FatVolume(fs).type;
}

export interface EspBootFile {
  data: Buffer;
  /** 1-based GPT partition number of the EFI system partition it was read from. */
  partition: number;
  path: string;
}

/**
 * Finds the EFI system partitions of a GPT disk and reads \EFI\BOOT\BOOTX64.EFI from the first that has it.
 * `readRange(offset, length)` returns disk bytes, so a large disk file need not be read whole; `head` holds at
 * least the GPT header and partition entries (the disk's first MiB does for every disk sfdisk makes).
 */
export function findEspBootFileIn(head: Buffer, readRange: (offset: number, length: number) => Buffer): EspBootFile {
  const { sectorSize, partitions } = gptPartitions(head);
  const esps = partitions.filter((p) => p.typeGuid.equals(ESP_TYPE_GUID));
  if (esps.length === 0) throw new DiskImageError('the disk has no EFI system partition');
  for (const esp of esps) {
    const start = esp.firstLba * sectorSize;
    const length = (esp.lastLba + 1 - esp.firstLba) * sectorSize;
    if (length <= 0 || length > 4 * 1024 ** 3)
      throw new DiskImageError(`damaged GPT: implausible size of partition ${esp.number}`);
    const fs = readRange(start, length);
    if (fs.length !== length)
      throw new DiskImageError(`damaged disk image: EFI system partition ${esp.number} lies outside the file`);
    const data = readFatFile(fs, BOOT_FILE_PATH);
    if (data) return { data, partition: esp.number, path: `\\${BOOT_FILE_PATH.join('\\')}` };
  }
  throw new DiskImageError(`the EFI system partition has no \\${BOOT_FILE_PATH.join('\\')}`);
}

/** Finds the EFI system partition of a raw GPT disk held in memory and reads \EFI\BOOT\BOOTX64.EFI from it. */
export function findEspBootFile(disk: Buffer): EspBootFile {
  return findEspBootFileIn(disk, (offset, length) => disk.subarray(offset, offset + length));
}
