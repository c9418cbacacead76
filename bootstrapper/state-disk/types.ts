/**
 * The state disk as the bootstrapper sees it (docs/design.md#state-disk): a disk with a plaintext UUID, encrypted with the disk key
 * the node receives from `init` or the join service. The node reads the UUID before it knows the key (the join
 * service derives the key from it), formats the disk on first use and unlocks it after a reboot. Unlocked, the disk
 * is a file system mounted at `mountPoint`: everything the node keeps lives below it (its cluster record, kubelet
 * files, the join service's files, etcd's data).
 * Implementations: ./gocryptfs.ts (an encrypted directory, local process nodes) and ./cryptsetup.ts (LUKS2, cloud
 * node images).
 */
import { UserError } from '../../lib/errors.js';

export interface StateDisk {
  /** The disk's UUID (lowercase v4 form), readable before the disk is unlocked. Stable for the disk's life. */
  readonly uuid: string;
  /** Where the unlocked disk's file system is mounted (valid after format() or unlock()). */
  readonly mountPoint: string;
  /** True once format() has run: the disk holds data and must be unlocked with its key, never formatted again. */
  isFormatted(): Promise<boolean>;
  /** Sets up encryption with `key` (32 bytes) on a disk that is not formatted; the disk is unlocked afterwards. */
  format(key: Uint8Array): Promise<void>;
  /** Unlocks a formatted disk; a key that is not the disk's is refused with a StateDiskError and changes nothing. */
  unlock(key: Uint8Array): Promise<void>;
  /** A file below the mount point (a relative name), or undefined if there is none. */
  readFile(name: string): Promise<Uint8Array | undefined>;
  /** Creates or replaces a file below the mount point atomically (after a crash: the old or the new content). */
  writeFile(name: string, data: Uint8Array): Promise<void>;
  /** Unmounts and forgets the key; later calls fail. */
  close(): Promise<void>;
}

/** A state-disk problem the operator can act on: wrong key, not a state disk, damaged, locked. */
export class StateDiskError extends UserError {}
