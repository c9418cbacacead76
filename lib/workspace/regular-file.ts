/**
 * Opening workspace and node files as what they must be: regular files, reached without following a symbolic
 * link, and no larger than their format ever needs. A link planted where the debug log or the state file goes
 * would otherwise make constellation append to, chmod or read another file (the open follows the link); a FIFO
 * would block the open; a 200 MB "config" would cost gigabytes. Every file is opened with O_NOFOLLOW (a link
 * as the last path component fails with ELOOP) and O_NONBLOCK (a FIFO opens at once instead of waiting for a
 * writer), then checked with fstat on the descriptor itself, so nothing can be swapped in between check and use.
 * The directories above the file are the user's choice (a workspace may live behind a link) and are followed.
 * Each refusal is a UserError naming the file and what it is instead.
 */
import { closeSync, constants, fstatSync, openSync, promises as fs, type Stats } from 'node:fs';
import { UserError } from '../errors.js';

export const KiB = 1024;
export const MiB = 1024 * KiB;

/**
 * Size limits of the files and documents constellation reads (docs: workspace.md "Limits"). Each is far above
 * what constellation writes (a config is a few KiB, a state file under 2 KiB) and far below what would make
 * parsing slow or memory-hungry.
 */
export const SIZE_LIMITS = {
  config: MiB,
  state: MiB,
  masterSecret: 64 * KiB,
  /** constellation-store.json: the cluster store's endpoints, CA and admin client certificate. */
  storeCredentials: MiB,
  kubeconfig: MiB,
  lockFile: 64 * KiB,
  resourceJournal: 4 * MiB,
  /** The journal of a running `upgrade apply`. */
  upgradeJournal: MiB,
  /** A file of measurements (PCR index -> expected value), as upgrades and `config` read them. */
  measurements: MiB,
  /** An attestation document given as a file (`attestation verify`); on the wire lib/atls/document.ts applies it. */
  attestationDocument: MiB,
  /** The local provider's small JSON files (node launch config, cluster record, control token). */
  nodeFile: MiB,
  /** A named file a node keeps on its state disk (certificates, kubeconfigs, records). */
  stateDiskFile: 16 * MiB,
} as const;

/** A file that is there but is not a regular file constellation may use. */
export class NotRegularFileError extends UserError {
  constructor(
    readonly file: string,
    what: string,
    kind: string,
  ) {
    super(
      `${capitalize(what)} ${file} is ${kind}, not a regular file: constellation does not follow links or open special files for it.`,
      {
        hint: `constellation neither follows nor replaces it: put the file itself at ${file}, or remove what is there, and run the command again.`,
      },
    );
  }
}

export class FileTooLargeError extends UserError {
  constructor(
    readonly file: string,
    what: string,
    size: number,
    readonly limit: number,
  ) {
    super(`${capitalize(what)} ${file} is ${formatSize(size)}; the limit is ${formatSize(limit)}.`, {
      hint: `This is not a file constellation wrote: check that ${file} is the right file.`,
    });
  }
}

export interface RegularFileOptions {
  /** Names the file in messages: "the state file", "the debug log". */
  what: string;
}

const NO_FOLLOW = constants.O_NOFOLLOW | constants.O_NONBLOCK;
const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT;

/**
 * The bytes of a regular file of at most `maxBytes`. A missing file throws the ENOENT error as it is (callers
 * decide what absence means); a link, a special file or a larger file is a UserError.
 */
export async function readRegularFile(
  file: string,
  options: RegularFileOptions & { maxBytes: number },
): Promise<Buffer> {
  const handle = await openChecked(file, constants.O_RDONLY, undefined, options.what);
  try {
    const { size } = await handle.stat();
    if (size > options.maxBytes) throw new FileTooLargeError(file, options.what, size, options.maxBytes);
    // The file may grow while it is read: read at most one byte past the limit to notice.
    const buffer = Buffer.alloc(Math.min(size, options.maxBytes) + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > options.maxBytes) throw new FileTooLargeError(file, options.what, length, options.maxBytes);
      if (length === buffer.length) break;
    }
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

/**
 * Opens a regular file for appending (created with `mode` when missing; `read` also allows reading it back).
 * The caller closes the handle.
 */
export function openRegularFileForAppend(
  file: string,
  options: RegularFileOptions & { mode: number; read?: boolean },
): Promise<fs.FileHandle> {
  return openChecked(
    file,
    options.read ? (APPEND & ~constants.O_WRONLY) | constants.O_RDWR : APPEND,
    options.mode,
    options.what,
  );
}

/** The synchronous form of openRegularFileForAppend (the debug log writes synchronously); returns the descriptor. */
export function openRegularFileForAppendSync(file: string, options: RegularFileOptions & { mode: number }): number {
  let fd: number;
  try {
    fd = openSync(file, APPEND | NO_FOLLOW, options.mode);
  } catch (err) {
    throw refusal(err, file, options.what);
  }
  try {
    checkRegular(fstatSync(fd), file, options.what);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

/** A UserError unless `file` is absent or a regular file (a link or directory where a file is to be replaced). */
export async function checkReplaceable(file: string, what: string): Promise<void> {
  let stats: Stats;
  try {
    stats = await fs.lstat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  checkRegular(stats, file, what);
}

async function openChecked(
  file: string,
  flags: number,
  mode: number | undefined,
  what: string,
): Promise<fs.FileHandle> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, flags | NO_FOLLOW, mode);
  } catch (err) {
    throw refusal(err, file, what);
  }
  try {
    checkRegular(await handle.stat(), file, what);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}

/** ELOOP from O_NOFOLLOW means the last component is a link; EISDIR a directory. Other errors pass unchanged. */
function refusal(err: unknown, file: string, what: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new NotRegularFileError(file, what, 'a symbolic link');
  if (code === 'EISDIR') return new NotRegularFileError(file, what, 'a directory');
  if (code === 'ENXIO') return new NotRegularFileError(file, what, 'a FIFO or socket without a reader');
  return err;
}

function checkRegular(stats: Stats, file: string, what: string): void {
  if (stats.isFile()) return;
  const kind = stats.isSymbolicLink()
    ? 'a symbolic link'
    : stats.isDirectory()
      ? 'a directory'
      : stats.isFIFO()
        ? 'a FIFO'
        : stats.isSocket()
          ? 'a socket'
          : stats.isCharacterDevice() || stats.isBlockDevice()
            ? 'a device'
            : 'a special file';
  throw new NotRegularFileError(file, what, kind);
}

export function formatSize(bytes: number): string {
  if (bytes >= MiB) return `${+(bytes / MiB).toFixed(1)} MiB`;
  if (bytes >= KiB) return `${+(bytes / KiB).toFixed(1)} KiB`;
  return `${bytes} bytes`;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
