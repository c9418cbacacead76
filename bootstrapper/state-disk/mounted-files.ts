/**
 * Files of an unlocked state disk, which both disk kinds mount as a file system (gocryptfs: a FUSE directory; LUKS2:
 * ext4 on the mapped volume): names are relative to the mount point and may not leave it; writes are atomic (temp
 * file, fsync, rename) with mode 0600; a missing file reads as undefined.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { StateDiskError } from './types.js';

/** The path of `name` below `mountPoint`; a StateDiskError for a name that is empty, absolute or leaves it. */
export function fileInMount(mountPoint: string, name: string): string {
  const file = path.resolve(mountPoint, name);
  if (name === '' || path.isAbsolute(name) || !file.startsWith(`${mountPoint}${path.sep}`)) {
    throw new StateDiskError(`"${name.slice(0, 40)}" is not a file name inside the state disk.`);
  }
  return file;
}

/** The file's bytes (a regular file only, no link followed, at most SIZE_LIMITS.stateDiskFile); undefined when missing. */
export async function readMountedFile(file: string): Promise<Uint8Array | undefined> {
  try {
    return new Uint8Array(
      await readRegularFile(file, {
        what: `the state-disk file ${path.basename(file)}`,
        maxBytes: SIZE_LIMITS.stateDiskFile,
      }),
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export async function writeMountedFile(file: string, data: Uint8Array): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFileAtomic(file, data, { mode: 0o600 });
}

/** Disk keys are 32 bytes (HKDF-SHA256 output). */
export function checkDiskKey(key: Uint8Array): void {
  if (key.length !== 32) throw new StateDiskError(`A state-disk key has 32 bytes, got ${key.length}.`);
}
