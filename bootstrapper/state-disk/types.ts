/**
 * The state disk as the bootstrapper sees it (DESIGN §7): a disk with a plaintext UUID, encrypted with the disk key
 * the node receives from `init` or the join service. The node reads the UUID before it knows the key (the join
 * service derives the key from it), formats the disk on first use and unlocks it after a reboot.
 * Implementations: ./file-disk.ts (a file, local process nodes) and ./cryptsetup.ts (LUKS, cloud node images; a stub).
 */
import { UserError } from '../../lib/errors.js';

export interface StateDisk {
  /** The disk's UUID (lowercase v4 form), readable before the disk is unlocked. Stable for the disk's life. */
  readonly uuid: string;
  /** True once format() has run: the disk holds data and must be unlocked with its key, never formatted again. */
  isFormatted(): Promise<boolean>;
  /** Sets up encryption with `key` (32 bytes) on a disk that is not formatted; the disk is unlocked afterwards. */
  format(key: Uint8Array): Promise<void>;
  /** Unlocks a formatted disk; a key that is not the disk's is refused with a StateDiskError. */
  unlock(key: Uint8Array): Promise<void>;
  /** Reads `length` bytes of the data area at `offset`. Bytes never written read as zeros. */
  read(offset: number, length: number): Promise<Uint8Array>;
  /** Writes `data` into the data area at `offset`; durable (fsynced) when the promise resolves. */
  write(offset: number, data: Uint8Array): Promise<void>;
  /** A named file of the disk's small file area, or undefined if there is none by that name. */
  readFile(name: string): Promise<Uint8Array | undefined>;
  /** Creates or replaces a named file atomically: after a crash the disk holds the old or the new content. */
  writeFile(name: string, data: Uint8Array): Promise<void>;
  /** Forgets the keys and closes the disk; later calls fail. */
  close(): Promise<void>;
}

/** A state-disk problem the operator can act on: wrong key, not a state disk, damaged, locked. */
export class StateDiskError extends UserError {}
