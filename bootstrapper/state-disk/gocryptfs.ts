/**
 * The state disk of local process nodes: an encrypted directory with gocryptfs (FUSE), mounted at the node's state
 * directory. The "disk" is a folder the provider made for the node:
 *
 *   <diskDir>/uuid      the disk's UUID, plaintext (like a cloud disk's serial: readable before the key is known)
 *   <diskDir>/cipher/   gocryptfs's ciphertext: file contents and names encrypted, nothing readable without the key
 *   <diskDir>/gocryptfs.log  gocryptfs's own messages
 *
 * format(key) writes what `gocryptfs -init -scryptn 10` writes (writeGocryptfsConfig, below), with the hex of the
 * derived disk key as password, then mounts. unlock(key) mounts; gocryptfs refuses a wrong password (exit 12) without
 * changing anything.
 * close() unmounts. A node that was killed leaves a dead FUSE mount behind; opening the disk at the next boot clears
 * it, as a VM boots with nothing mounted. The key goes to gocryptfs on stdin, never on a command line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  createCipheriv,
  hkdfSync,
  randomBytes,
  randomUUID as nodeRandomUUID,
  scrypt as scryptCallback,
  type ScryptOptions,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { detachMount, mountPointsUnder } from '../../lib/mounts.js';
import { FileExistsError, writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { checkDiskKey, fileInMount, readMountedFile, writeMountedFile } from './mounted-files.js';
import { openRegularFileForAppend, readRegularFile } from '../../lib/workspace/regular-file.js';
import { StateDiskError, type StateDisk } from './types.js';

export interface GocryptfsStateDiskOptions {
  /** The disk folder (uuid + cipher/). */
  diskDir: string;
  /** Where the decrypted file system is mounted while the disk is open. */
  mountPoint: string;
  gocryptfsBinary?: string;
  fusermountBinary?: string;
  /** Makes the UUID of a new disk; a parameter so tests can pin it. */
  randomUUID?: () => string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** gocryptfs's exit code for a wrong password. */
const WRONG_PASSWORD = 12;

/** Opens (and on first use creates) the disk folder; clears a dead mount an earlier boot left. */
export async function openGocryptfsStateDisk(options: GocryptfsStateDiskOptions): Promise<GocryptfsStateDisk> {
  await fs.mkdir(options.diskDir, { recursive: true, mode: 0o700 });
  const uuidFile = path.join(options.diskDir, 'uuid');
  let uuid = await readUuid(uuidFile);
  if (uuid === undefined) {
    try {
      await writeFileAtomic(uuidFile, `${(options.randomUUID ?? nodeRandomUUID)().toLowerCase()}\n`, {
        exclusive: true,
        mode: 0o600,
      });
    } catch (err) {
      if (!(err instanceof FileExistsError)) throw err;
    }
    uuid = await readUuid(uuidFile);
  }
  if (uuid === undefined)
    throw new StateDiskError(`The state disk ${options.diskDir} has no valid UUID in ${uuidFile}.`);
  const disk = new GocryptfsStateDisk(options, uuid);
  await disk.clearDeadMount();
  await fs.mkdir(options.mountPoint, { recursive: true, mode: 0o700 });
  return disk;
}

async function readUuid(file: string): Promise<string | undefined> {
  let text: string;
  try {
    text = (await readRegularFile(file, { what: "the state disk's UUID file", maxBytes: 4096 })).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const uuid = text.trim();
  if (!UUID.test(uuid))
    throw new StateDiskError(`${file} does not hold a disk UUID.`, {
      hint: 'The disk folder is damaged; replace the node.',
    });
  return uuid;
}

export class GocryptfsStateDisk implements StateDisk {
  readonly mountPoint: string;
  private readonly cipherDir: string;
  /** gocryptfs's messages (never the key: that goes on stdin). */
  private readonly logFile: string;
  private mounted = false;
  private closed = false;

  constructor(
    private readonly options: GocryptfsStateDiskOptions,
    readonly uuid: string,
  ) {
    this.mountPoint = path.resolve(options.mountPoint);
    this.cipherDir = path.join(options.diskDir, 'cipher');
    this.logFile = path.join(options.diskDir, 'gocryptfs.log');
  }

  async isFormatted(): Promise<boolean> {
    return fs.access(path.join(this.cipherDir, 'gocryptfs.conf')).then(
      () => true,
      () => false,
    );
  }

  async format(key: Uint8Array): Promise<void> {
    this.checkOpen();
    if (await this.isFormatted())
      throw new StateDiskError(
        `The state disk ${this.uuid} is formatted already; it is unlocked, never formatted again.`,
      );
    checkDiskKey(key);
    // A folder left by a format that was killed half-way holds no data yet: start it again.
    await fs.rm(this.cipherDir, { recursive: true, force: true });
    await fs.mkdir(this.cipherDir, { mode: 0o700 });
    await writeGocryptfsConfig(this.cipherDir, hexPassword(key));
    await this.mount(key);
  }

  async unlock(key: Uint8Array): Promise<void> {
    this.checkOpen();
    if (!(await this.isFormatted()))
      throw new StateDiskError(`The state disk ${this.uuid} is not formatted; there is nothing to unlock.`);
    checkDiskKey(key);
    await this.mount(key);
  }

  async readFile(name: string): Promise<Uint8Array | undefined> {
    return readMountedFile(this.pathOf(name));
  }

  async writeFile(name: string, data: Uint8Array): Promise<void> {
    return writeMountedFile(this.pathOf(name), data);
  }

  /** Unmounts; gocryptfs exits with its mount. Later calls but close() fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.mounted) return;
    this.mounted = false;
    const result = await run(this.options.fusermountBinary ?? 'fusermount3', ['-u', this.mountPoint]);
    // Busy (a process still has a file open): detach it now, the kernel finishes when the last file closes.
    if (result.code !== 0) await detachMount(this.mountPoint, this.options.fusermountBinary);
  }

  /** A mount whose gocryptfs is gone answers every access with ENOTCONN: detach it. */
  async clearDeadMount(): Promise<void> {
    if ((await mountPointsUnder(this.mountPoint)).includes(this.mountPoint))
      await detachMount(this.mountPoint, this.options.fusermountBinary);
  }

  private async mount(key: Uint8Array): Promise<void> {
    if (this.mounted) return;
    await this.clearDeadMount();
    await fs.mkdir(this.mountPoint, { recursive: true, mode: 0o700 });
    // In the foreground: gocryptfs serves the mount in the process started here. (Without -fg it starts itself a
    // second time as its daemon and waits for that one: two starts of a Go program per mount instead of one.)
    const result = await serveUntilMounted(
      this.options.gocryptfsBinary ?? 'gocryptfs',
      ['-fg', '-q', '-nosyslog', this.cipherDir, this.mountPoint],
      { input: hexPassword(key), logFile: this.logFile, mountPoint: this.mountPoint },
    );
    if (result.code === WRONG_PASSWORD) {
      throw new StateDiskError(`The key does not unlock the state disk ${this.uuid}; nothing was changed.`, {
        hint: 'The disk belongs to another cluster, or the master secret is not the one the cluster was initialized with.',
      });
    }
    if (result.code === MOUNT_TIMED_OUT)
      throw new StateDiskError(
        `gocryptfs did not mount the state disk ${this.uuid} within ${MOUNT_TIMEOUT_MS / 1000} s; it was stopped.`,
        { hint: `See its messages in ${this.logFile}.` },
      );
    if (result.code !== 0)
      throw new StateDiskError(
        `gocryptfs could not mount the state disk ${this.uuid}: ${result.stderr || `exit code ${result.code}`}`,
      );
    this.mounted = true;
  }

  private pathOf(name: string): string {
    this.checkOpen();
    if (!this.mounted) throw new StateDiskError(`The state disk ${this.uuid} is locked; unlock it first.`);
    return fileInMount(this.mountPoint, name);
  }

  private checkOpen(): void {
    if (this.closed) throw new StateDiskError(`The state disk ${this.uuid} is closed.`);
  }
}

/** The password of a disk: the hex of its key. */
const hexPassword = (key: Uint8Array) => Buffer.from(key).toString('hex');

/** scrypt cost 2^10, gocryptfs's least: the password is a 32-byte random key, so stretching it buys nothing. */
const SCRYPT = { N: 1024, r: 8, p: 1, keyLen: 32 } as const;
/** The feature flags `gocryptfs -init` (2.x) sets by default. */
const FEATURE_FLAGS = ['HKDF', 'GCMIV128', 'DirIV', 'EMENames', 'LongNames', 'Raw64'];

const scrypt = (password: string, salt: Buffer, options: ScryptOptions & { keyLen: number }) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCallback(password, salt, options.keyLen, options, (err, derived) => (err ? reject(err) : resolve(derived))),
  );

/**
 * Makes a new gocryptfs file system in the empty folder `cipherDir`, as `gocryptfs -init -scryptn 10` does, without
 * running gocryptfs: its start and exit were about a third of a node's state disk format (docs/workflows/mini.md, "How
 * long it takes"). The two files it writes (gocryptfs's own format, version 2, with its default feature flags):
 *
 *   gocryptfs.conf   JSON; EncryptedKey = IV (16 random bytes) ‖ AES-256-GCM(masterKey) ‖ tag, with the key
 *                    HKDF-SHA256(scrypt(password, Salt), no salt, "AES-GCM file content encryption") and the block
 *                    number 0 (8 zero bytes) as additional data, as gocryptfs encrypts a file's block 0 with no file ID
 *   gocryptfs.diriv  the root folder's 16 random bytes of IV for its file names
 *
 * The master key (32 random bytes) exists only in this function and, once mounted, in gocryptfs. The configuration
 * file is written last, so a folder without it is an unfinished format (isFormatted); test/bootstrapper/state-disk
 * checks the files against those of `gocryptfs -init` and mounts them with gocryptfs.
 */
export async function writeGocryptfsConfig(cipherDir: string, password: string): Promise<void> {
  const salt = randomBytes(32);
  const masterKey = randomBytes(32);
  const iv = randomBytes(16);
  const scryptHash = await scrypt(password, salt, SCRYPT);
  const gcmKey = Buffer.from(hkdfSync('sha256', scryptHash, Buffer.alloc(0), 'AES-GCM file content encryption', 32));
  const cipher = createCipheriv('aes-256-gcm', gcmKey, iv);
  cipher.setAAD(Buffer.alloc(8));
  const encryptedKey = Buffer.concat([iv, cipher.update(masterKey), cipher.final(), cipher.getAuthTag()]);
  masterKey.fill(0);
  scryptHash.fill(0);
  gcmKey.fill(0);
  const config = {
    Creator: 'constellation (as gocryptfs -init)',
    EncryptedKey: encryptedKey.toString('base64'),
    ScryptObject: { Salt: salt.toString('base64'), N: SCRYPT.N, R: SCRYPT.r, P: SCRYPT.p, KeyLen: SCRYPT.keyLen },
    Version: 2,
    FeatureFlags: FEATURE_FLAGS,
  };
  await writeFileAtomic(path.join(cipherDir, 'gocryptfs.diriv'), randomBytes(16), { mode: 0o444 });
  await writeFileAtomic(path.join(cipherDir, 'gocryptfs.conf'), `${JSON.stringify(config, null, '\t')}\n`, {
    mode: 0o400,
  });
}

interface RunResult {
  code: number;
  /** What the program wrote to stderr during this run (its tail). */
  stderr: string;
}

/** How long a mount may take before gocryptfs is given up (it is stopped, the mount fails). */
const MOUNT_TIMEOUT_MS = 30_000;
/** serveUntilMounted's code for a server that neither mounted nor ended in time (it was stopped). */
const MOUNT_TIMED_OUT = -1;
/** How often the mount point is looked at while gocryptfs mounts (a mount takes some 30-40 ms here). */
const MOUNT_POLL_MS = 5;

/**
 * Runs a program with `input` on stdin and its stderr appended to `logFile` (a pipe would not do: a mount's server
 * outlives this call, and a Go program dies of SIGPIPE when it writes to a closed pipe) until `done` settles with the
 * code the call reports (by default the program's exit code), and reads what it wrote there when that code is not 0.
 */
async function runLogged(
  file: string,
  args: string[],
  options: { input?: string; logFile?: string; detached?: boolean },
  done: (child: ChildProcess, exited: Promise<number>) => Promise<number> = (_, exited) => exited,
): Promise<RunResult> {
  const log = options.logFile
    ? await openRegularFileForAppend(options.logFile, { what: 'the gocryptfs log', mode: 0o600, read: true })
    : undefined;
  const start = log ? (await log.stat()).size : 0;
  try {
    const child = spawn(file, args, {
      stdio: ['pipe', 'ignore', log ? log.fd : 'ignore'],
      detached: options.detached ?? false,
    });
    const exited = new Promise<number>((resolve, reject) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          err.code === 'ENOENT'
            ? new StateDiskError(`${file} is not installed.`, {
                hint: 'Install gocryptfs and fuse3 (npm run setup does).',
              })
            : err,
        );
      });
      child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1)));
    });
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(options.input ?? '');
    const code = await done(child, exited);
    let stderr = '';
    if (log && code !== 0) {
      const { size } = await log.stat();
      const length = Math.min(size - start, 4096);
      const buffer = Buffer.alloc(length);
      await log.read(buffer, 0, length, size - length);
      stderr = buffer.toString('utf8').trim();
    }
    return { code, stderr };
  } finally {
    await log?.close();
  }
}

/** Runs a program to its end (fusermount3). */
function run(file: string, args: string[]): Promise<RunResult> {
  return runLogged(file, args, {});
}

/**
 * Starts a FUSE server in the foreground, detached (in a session of its own, as a daemon: it serves the mount until
 * the mount goes), and returns once `mountPoint` is a mount of another device than its folder (code 0), or with the
 * exit code when the server ends first (gocryptfs: 12 for a wrong password). A server that neither mounts nor ends
 * within MOUNT_TIMEOUT_MS is stopped.
 */
function serveUntilMounted(
  file: string,
  args: string[],
  options: { input: string; logFile: string; mountPoint: string },
): Promise<RunResult> {
  return runLogged(file, args, { ...options, detached: true }, async (child, exited) => {
    // Handled at once: a program that cannot start (ENOENT) rejects `exited` before the first stat returns.
    let ended = false;
    exited.then(
      () => (ended = true),
      () => (ended = true),
    );
    const folderDevice = (await fs.stat(path.dirname(options.mountPoint))).dev;
    for (const deadline = Date.now() + MOUNT_TIMEOUT_MS; !ended;) {
      const device = await fs.stat(options.mountPoint).then(
        (stat) => stat.dev,
        () => folderDevice,
      );
      if (device !== folderDevice) {
        child.unref(); // it serves the mount on its own; this process does not wait for it to end
        return 0;
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        await exited.catch(() => undefined);
        return MOUNT_TIMED_OUT;
      }
      await new Promise((resolve) => setTimeout(resolve, MOUNT_POLL_MS));
    }
    return exited;
  });
}
