/**
 * A state disk in a file: the local provider's nodes each have one (a sparse file of the configured size, all zeros
 * when created). On first open a blank file gets a plaintext header with a fresh random UUID; format() writes the
 * key-check value, after which the disk opens only with the right key. Layout and keys: ./layout.ts; sector
 * encryption: ./sector-cipher.ts; named files: ./files-area.ts. The file never grows: it stays as large (and as
 * sparse) as the provider made it. One process uses a disk at a time (the node's bootstrapper); operations of that
 * process are serialized here so partial-sector writes never interleave.
 */
import { randomUUID as nodeRandomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { currentFiles, checkFileName, decodeSlot, encodeSlot, type Files } from './files-area.js';
import {
  checkKeyLength,
  decodeHeader,
  encodeHeader,
  filesMacKey,
  keyCheckValue,
  keyMatches,
  MIN_DISK_SECTORS,
  newHeader,
  regions,
  SECTOR_SIZE,
  xtsKey,
  type DiskHeader,
} from './layout.js';
import { SectorCipher } from './sector-cipher.js';
import { StateDiskError, type StateDisk } from './types.js';

type FileHandle = fs.FileHandle;

export interface FileStateDiskOptions {
  /** Makes the UUID of a blank disk; a parameter so tests can pin it. */
  randomUUID?: () => string;
}

/** Opens the state-disk file at `file`, writing a header with a new UUID if the file is blank. */
export async function openFileStateDisk(file: string, options: FileStateDiskOptions = {}): Promise<FileStateDisk> {
  const handle = await fs.open(file, 'r+').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') {
      throw new StateDiskError(`The state disk ${file} does not exist.`, {
        hint: 'The provider creates it with the node; check the node\'s STATE_DISK setting.',
      });
    }
    throw err;
  });
  try {
    const stat = await handle.stat();
    const totalSectors = Math.floor(stat.size / SECTOR_SIZE);
    if (!stat.isFile() || totalSectors < MIN_DISK_SECTORS) {
      throw new StateDiskError(`${file} cannot be a state disk: it is not a file of at least ${MIN_DISK_SECTORS * SECTOR_SIZE} bytes.`);
    }
    let header = decodeHeader(await readAt(handle, 0, SECTOR_SIZE), file);
    if (!header) {
      header = newHeader((options.randomUUID ?? nodeRandomUUID)().toLowerCase(), totalSectors);
      await writeAt(handle, 0, encodeHeader(header));
      await handle.datasync();
    }
    if (regions(header, totalSectors).dataSectors < 1) {
      throw new StateDiskError(`The state-disk header of ${file} does not fit the file's size (${stat.size} bytes).`, {
        hint: 'The file was truncated after it was formatted; replace the node so that it gets a new state disk.',
      });
    }
    return new FileStateDisk(file, handle, header, totalSectors);
  } catch (err) {
    await handle.close();
    throw err;
  }
}

interface Unlocked {
  cipher: SectorCipher;
  macKey: Buffer;
  files: Files;
  generation: number;
}

export class FileStateDisk implements StateDisk {
  readonly uuid: string;
  /** Size of the data area (read/write) in bytes. */
  readonly capacity: number;
  private readonly filesStart: number;
  private readonly dataStart: number;
  private unlocked?: Unlocked;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    private header: DiskHeader,
    totalSectors: number,
  ) {
    this.uuid = header.uuid;
    const r = regions(header, totalSectors);
    this.filesStart = r.filesStart;
    this.dataStart = r.dataStart;
    this.capacity = r.dataSectors * SECTOR_SIZE;
  }

  isFormatted(): Promise<boolean> {
    return this.exclusive(async () => this.header.formatted);
  }

  format(key: Uint8Array): Promise<void> {
    return this.exclusive(async () => {
      checkKeyLength(key);
      if (this.header.formatted) {
        throw new StateDiskError(`State disk ${this.uuid} is already formatted; formatting it again would destroy its data.`, {
          hint: 'Unlock it with its key instead (a rebooted node gets the key back through the join service).',
        });
      }
      // Both file-area slots start unwritten (all zero), so the new disk has no files whatever was there before.
      const zero = Buffer.alloc(SECTOR_SIZE);
      for (const slot of [0, 1]) await writeAt(this.handle, this.slotSector(slot) * SECTOR_SIZE, zero);
      await this.handle.datasync();
      const header: DiskHeader = { ...this.header, formatted: true, keyCheck: keyCheckValue(key) };
      await writeAt(this.handle, 0, encodeHeader(header));
      await this.handle.datasync();
      this.header = header;
      this.unlocked = { ...this.keysFor(key), files: new Map(), generation: 0 };
    });
  }

  unlock(key: Uint8Array): Promise<void> {
    return this.exclusive(async () => {
      checkKeyLength(key);
      if (!this.header.formatted) {
        throw new StateDiskError(`State disk ${this.uuid} is not formatted yet, so there is nothing to unlock.`, {
          hint: 'Format it with the disk key first.',
        });
      }
      if (!keyMatches(this.header, key)) {
        throw new StateDiskError(`The key does not unlock state disk ${this.uuid}: the disk was formatted with another key.`, {
          hint: 'The disk belongs to another cluster (another master secret). Its data stays encrypted; replace the node to give it a new disk.',
        });
      }
      const keys = this.keysFor(key);
      const slotBytes = this.header.filesSlotSectors * SECTOR_SIZE;
      const slots = [0, 1].map(async (slot) => {
        const first = this.slotSector(slot);
        return decodeSlot(keys.cipher.decrypt(first, await readAt(this.handle, first * SECTOR_SIZE, slotBytes)), keys.macKey);
      });
      const { generation, files } = currentFiles([await slots[0]!, await slots[1]!], this.uuid);
      this.unlocked = { ...keys, files, generation };
    });
  }

  read(offset: number, length: number): Promise<Uint8Array> {
    return this.exclusive(async () => {
      const { cipher } = this.requireUnlocked();
      this.checkRange('read', offset, length);
      if (length === 0) return new Uint8Array(0);
      const { first, plaintext } = await this.readSectors(cipher, offset, length);
      const start = offset - first * SECTOR_SIZE;
      return new Uint8Array(plaintext.subarray(start, start + length));
    });
  }

  write(offset: number, data: Uint8Array): Promise<void> {
    return this.exclusive(async () => {
      const { cipher } = this.requireUnlocked();
      this.checkRange('write', offset, data.length);
      if (data.length === 0) return;
      const aligned = offset % SECTOR_SIZE === 0 && data.length % SECTOR_SIZE === 0;
      const { first, plaintext } = aligned
        ? { first: offset / SECTOR_SIZE, plaintext: Buffer.alloc(data.length) }
        : await this.readSectors(cipher, offset, data.length);
      plaintext.set(data, offset - first * SECTOR_SIZE);
      const sector = this.dataStart + first;
      await writeAt(this.handle, sector * SECTOR_SIZE, cipher.encrypt(sector, plaintext));
      await this.handle.datasync();
    });
  }

  readFile(name: string): Promise<Uint8Array | undefined> {
    return this.exclusive(async () => {
      checkFileName(name);
      const data = this.requireUnlocked().files.get(name);
      return data && new Uint8Array(data);
    });
  }

  writeFile(name: string, data: Uint8Array): Promise<void> {
    return this.exclusive(async () => {
      checkFileName(name);
      const state = this.requireUnlocked();
      const files = new Map(state.files).set(name, new Uint8Array(data));
      const generation = state.generation + 1;
      const image = encodeSlot(files, generation, state.macKey, this.header.filesSlotSectors * SECTOR_SIZE);
      const first = this.slotSector(generation % 2);
      await writeAt(this.handle, first * SECTOR_SIZE, state.cipher.encrypt(first, image));
      await this.handle.datasync();
      state.files = files;
      state.generation = generation;
    });
  }

  close(): Promise<void> {
    return this.exclusive(async () => {
      this.unlocked = undefined;
      this.closed = true;
      await this.handle.close();
    }, true);
  }

  private keysFor(key: Uint8Array): Omit<Unlocked, 'files' | 'generation'> {
    return { cipher: new SectorCipher(xtsKey(key)), macKey: filesMacKey(key) };
  }

  private slotSector(slot: number): number {
    return this.filesStart + slot * this.header.filesSlotSectors;
  }

  /** Decrypted whole sectors of the data area covering [offset, offset+length). */
  private async readSectors(cipher: SectorCipher, offset: number, length: number) {
    const first = Math.floor(offset / SECTOR_SIZE);
    const end = Math.ceil((offset + length) / SECTOR_SIZE);
    const sector = this.dataStart + first;
    const ciphertext = await readAt(this.handle, sector * SECTOR_SIZE, (end - first) * SECTOR_SIZE);
    return { first, plaintext: cipher.decrypt(sector, ciphertext) };
  }

  private requireUnlocked(): Unlocked {
    if (!this.unlocked) {
      throw new StateDiskError(`State disk ${this.uuid} is locked: format or unlock it with its key first.`);
    }
    return this.unlocked;
  }

  private checkRange(what: string, offset: number, length: number): void {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > this.capacity) {
      throw new RangeError(`A ${what} of ${length} bytes at offset ${offset} is outside the state disk's data area (${this.capacity} bytes).`);
    }
  }

  /** Runs `op` after every earlier operation; none runs on a closed disk (close itself is idempotent). */
  private exclusive<T>(op: () => Promise<T>, closing = false): Promise<T> {
    const run = async () => {
      if (this.closed) {
        if (closing) return undefined as T;
        throw new StateDiskError(`State disk ${this.uuid} is closed.`);
      }
      return op();
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return buffer;
}

async function writeAt(handle: FileHandle, position: number, data: Buffer): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}
