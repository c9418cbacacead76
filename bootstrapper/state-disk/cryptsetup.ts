/**
 * The state disk of cloud nodes (docs/design.md#state-disk): the VM's state block device encrypted with LUKS2 through cryptsetup,
 * behind the StateDisk interface.
 *
 *   uuid          the LUKS header's UUID (`cryptsetup luksUUID`, or the header's field; the header is plaintext,
 *                 so it is read before the key is known). A blank disk has no header yet: it gets a fresh v4 UUID
 *                 at open, which format() writes into the header (a node that restarts before formatting simply
 *                 picks another).
 *   isFormatted   `cryptsetup isLuks`; at open the header is read directly where that gives cryptsetup's answer for
 *                 certain (./luks-header.ts: a blank disk, or a LUKS2 header cryptsetup wrote), so a node's start
 *                 spawns no cryptsetup.
 *   format(key)   `cryptsetup luksFormat --type luks2` (AES-XTS, 512-bit volume key) with the derived disk key on
 *                 stdin as the passphrase, then the volume is activated fresh (a new file system). Where
 *                 device-mapper works (a cloud or qemu VM), the volume is authenticated as upstream's disk-mapper
 *                 formats it: `--integrity hmac-sha256` puts dm-integrity under dm-crypt, so every sector carries
 *                 an HMAC of its ciphertext and a sector changed on the host reads as an I/O error in the guest,
 *                 not as silently different data (docs/design.md#state-disk). With 4096-byte sectors, as upstream.
 *                 Unlike upstream, the volume is not wiped at format (`--integrity-no-wipe`): a wipe writes every
 *                 sector once, minutes per GB in a VM without KVM. A sector nothing wrote fails to read, so nothing
 *                 may read one: the areas where mkfs.ext4 (libblkid) looks for old signatures, the first and last
 *                 PROBE_AREA_BYTES, are zeroed first ("could not read block 0" otherwise), and mkfs writes its inode
 *                 tables and journal at once (lazy_itable_init=0, lazy_journal_init=0), so the file system reads only
 *                 blocks it wrote. A 4096-byte sector is one page, so no whole-block write reads a sector back; the
 *                 one write smaller than a block, a superblock (1 KiB), goes only to block 0, zeroed before: no
 *                 backup superblocks (sparse_super2, num_backup_sb=0, no resize inode; mkfs failed writing one otherwise). dm-integrity
 *                 turns a damaged superblock into an I/O error, where a backup would not help anyway.
 *                 cryptsetup formats dm-integrity's superblock through device-mapper, so the test-passphrase
 *                 activator (no device-mapper) formats without integrity.
 *   unlock(key)   the volume is activated with the key; LUKS refuses another key ("No key available", exit 2).
 *   mountPoint    where the activated volume's file system is mounted (/var/run/state): everything the node keeps;
 *                 readFile/writeFile below it (a temp file, fsynced, renamed).
 *
 * The disk key is a 32-byte HKDF output, not a password, so the key slot uses PBKDF2 at cryptsetup's minimum
 * iterations: a slow KDF would add seconds per boot and no strength. Activation (device-mapper open, mkfs, mount)
 * is a parameter: the default runs `cryptsetup open`, `mkfs.ext4` and `mount`; machines without device-mapper (the
 * ones these tests run on) use one that checks the key with `cryptsetup open --test-passphrase` and keeps the files
 * in the mount point as a plain folder.
 */
import { spawn } from 'node:child_process';
import { randomUUID as nodeRandomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { readLuksHeader } from './luks-header.js';
import { checkDiskKey, fileInMount, readMountedFile, writeMountedFile } from './mounted-files.js';
import { StateDiskError, type StateDisk } from './types.js';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program with optional stdin bytes (default: node:child_process spawn). */
export type RunCommand = (program: string, args: string[], stdin?: Uint8Array) => Promise<CommandResult>;

export const spawnCommand: RunCommand = (program, args, stdin) =>
  new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(stdin ? Buffer.from(stdin) : undefined);
  });

/** Makes the LUKS volume usable: maps it with `key` and mounts its file system; `fresh` makes the file system first. */
export interface LuksActivator {
  /** Whether format() adds dm-integrity (hmac-sha256): only where device-mapper works. */
  readonly integrity: boolean;
  /** Mounts the volume's file system at `mountPoint`. A wrong key is a StateDiskError, and nothing is changed. */
  activate(device: string, key: Uint8Array, options: { fresh: boolean; mountPoint: string }): Promise<void>;
  deactivate(mountPoint: string): Promise<void>;
}

/** The mapping's name below /dev/mapper and where its file system is mounted on a cloud node. */
export const LUKS_MAPPING = 'state';
export const STATE_MOUNT = '/var/run/state';

const WRONG_KEY_EXIT = 2;

function wrongKey(device: string): StateDiskError {
  return new StateDiskError(`The key does not open the state disk ${device}.`, {
    hint: 'This disk belongs to another cluster or was formatted with another master secret; replace the node to get a new disk.',
  });
}

async function must(
  run: RunCommand,
  what: string,
  program: string,
  args: string[],
  stdin?: Uint8Array,
): Promise<CommandResult> {
  const result = await run(program, args, stdin);
  if (result.code !== 0)
    throw new StateDiskError(`${what} failed: ${result.stderr.trim() || `${program} exited with ${result.code}`}.`);
  return result;
}

/** Activation on a cloud node: device-mapper mapping, ext4, mount. */
export function deviceMapperActivator(options: { run?: RunCommand; mapping?: string } = {}): LuksActivator {
  const run = options.run ?? spawnCommand;
  const mapping = options.mapping ?? LUKS_MAPPING;
  const mapped = `/dev/mapper/${mapping}`;
  return {
    integrity: true,
    async activate(device, key, { fresh, mountPoint }) {
      const opened = await run('cryptsetup', ['open', '--type', 'luks2', '--key-file', '-', device, mapping], key);
      if (opened.code === WRONG_KEY_EXIT) throw wrongKey(device);
      if (opened.code !== 0)
        throw new StateDiskError(`Opening the state disk ${device} failed: ${opened.stderr.trim()}.`);
      if (fresh) {
        await zeroProbeAreas(run, mapped);
        await must(run, `Making a file system on ${mapped}`, 'mkfs.ext4', [
          '-q',
          '-F',
          '-O',
          'sparse_super2,^resize_inode',
          '-E',
          'num_backup_sb=0,lazy_itable_init=0,lazy_journal_init=0,nodiscard',
          mapped,
        ]);
      }
      await fs.mkdir(mountPoint, { recursive: true, mode: 0o700 });
      await must(run, `Mounting ${mapped}`, 'mount', [mapped, mountPoint]);
    },
    async deactivate(mountPoint) {
      await run('umount', [mountPoint]);
      await run('cryptsetup', ['close', mapping]);
    },
  };
}

/** Where libblkid looks for signatures of an old file system or RAID member: near the start and the end (see the header). */
const PROBE_AREA_BYTES = 2 * 1024 * 1024;
const BLOCK = 4096;

/** Writes zeros over the first and last PROBE_AREA_BYTES of a freshly opened volume, so each has a valid integrity tag. */
async function zeroProbeAreas(run: RunCommand, mapped: string): Promise<void> {
  const sized = await must(run, `Reading the size of ${mapped}`, 'blockdev', ['--getsize64', mapped]);
  const blocks = Math.floor(Number(sized.stdout.trim()) / BLOCK);
  const area = Math.min(PROBE_AREA_BYTES / BLOCK, blocks);
  for (const seek of new Set([0, blocks - area])) {
    await must(run, `Zeroing ${mapped} at block ${seek}`, 'dd', [
      'if=/dev/zero',
      `of=${mapped}`,
      `bs=${BLOCK}`,
      `count=${area}`,
      `seek=${seek}`,
      'conv=fsync',
    ]);
  }
}

/**
 * Activation where device-mapper is missing: the key is checked against the header exactly as `cryptsetup open`
 * would (`--test-passphrase`), and the mount point is a plain folder standing in for the mounted file system.
 */
export function testPassphraseActivator(options: { run?: RunCommand } = {}): LuksActivator {
  const run = options.run ?? spawnCommand;
  return {
    integrity: false,
    async activate(device, key, { fresh, mountPoint }) {
      const checked = await run(
        'cryptsetup',
        ['open', '--test-passphrase', '--type', 'luks2', '--key-file', '-', device],
        key,
      );
      if (checked.code === WRONG_KEY_EXIT) throw wrongKey(device);
      if (checked.code !== 0)
        throw new StateDiskError(`Checking the key of ${device} failed: ${checked.stderr.trim()}.`);
      if (fresh) await fs.rm(mountPoint, { recursive: true, force: true });
      await fs.mkdir(mountPoint, { recursive: true, mode: 0o700 });
    },
    async deactivate() {},
  };
}

export interface LuksStateDiskOptions {
  /** Where the volume's file system is mounted (default /var/run/state). */
  mountPoint?: string;
  run?: RunCommand;
  activator?: LuksActivator;
  randomUUID?: () => string;
}

export async function openLuksStateDisk(device: string, options: LuksStateDiskOptions = {}): Promise<LuksStateDisk> {
  const run = options.run ?? spawnCommand;
  try {
    await fs.access(device);
  } catch {
    throw new StateDiskError(`The state disk ${device} does not exist.`, {
      hint: "The VM needs its state disk attached; check the node group's stateDiskSizeGB.",
    });
  }
  // The header itself where its answer is certain, else cryptsetup (./luks-header.ts: a VM's first cryptsetup is
  // slow to start without KVM).
  const header = await readLuksHeader(device);
  const formatted =
    header.kind === 'unsure' ? (await run('cryptsetup', ['isLuks', device])).code === 0 : header.kind === 'luks2';
  let uuid: string;
  if (header.kind === 'luks2') uuid = header.uuid;
  else if (formatted)
    uuid = (await must(run, `Reading the LUKS UUID of ${device}`, 'cryptsetup', ['luksUUID', device])).stdout.trim();
  else uuid = (options.randomUUID ?? nodeRandomUUID)();
  uuid = uuid.toLowerCase();
  return new LuksStateDisk(
    device,
    path.resolve(options.mountPoint ?? STATE_MOUNT),
    uuid,
    formatted,
    run,
    options.activator ?? deviceMapperActivator({ run }),
  );
}

export class LuksStateDisk implements StateDisk {
  private mounted = false;
  private closed = false;

  constructor(
    readonly device: string,
    readonly mountPoint: string,
    readonly uuid: string,
    private formatted: boolean,
    private readonly run: RunCommand,
    private readonly activator: LuksActivator,
  ) {}

  async isFormatted(): Promise<boolean> {
    return this.formatted;
  }

  async format(key: Uint8Array): Promise<void> {
    this.usable();
    checkDiskKey(key);
    if (this.formatted)
      throw new StateDiskError(`The state disk ${this.device} is already formatted; unlock it instead.`);
    await must(
      this.run,
      `Formatting the state disk ${this.device} with LUKS2${this.activator.integrity ? ' and dm-integrity' : ''}`,
      'cryptsetup',
      [
        'luksFormat',
        '--batch-mode',
        '--type',
        'luks2',
        '--cipher',
        'aes-xts-plain64',
        '--key-size',
        '512',
        // hmac-sha256's 256-bit key is added to the volume key (768 bits in all).
        ...(this.activator.integrity
          ? ['--integrity', 'hmac-sha256', '--integrity-no-wipe', '--sector-size', '4096']
          : []),
        '--pbkdf',
        'pbkdf2',
        '--pbkdf-force-iterations',
        '1000',
        '--uuid',
        this.uuid,
        '--label',
        'constellation-state',
        '--key-file',
        '-',
        this.device,
      ],
      key,
    );
    this.formatted = true;
    await this.activator.activate(this.device, key, { fresh: true, mountPoint: this.mountPoint });
    this.mounted = true;
  }

  async unlock(key: Uint8Array): Promise<void> {
    this.usable();
    checkDiskKey(key);
    if (!this.formatted)
      throw new StateDiskError(`The state disk ${this.device} is not formatted yet; format it first.`);
    if (this.mounted) return;
    await this.activator.activate(this.device, key, { fresh: false, mountPoint: this.mountPoint });
    this.mounted = true;
  }

  async readFile(name: string): Promise<Uint8Array | undefined> {
    return readMountedFile(this.filePath(name));
  }

  async writeFile(name: string, data: Uint8Array): Promise<void> {
    return writeMountedFile(this.filePath(name), data);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.mounted) await this.activator.deactivate(this.mountPoint);
    this.mounted = false;
  }

  private usable(): void {
    if (this.closed) throw new StateDiskError(`The state disk ${this.device} is closed.`);
  }

  /** A file below the mount point; a name that leaves it is refused. */
  private filePath(name: string): string {
    this.usable();
    if (!this.mounted)
      throw new StateDiskError(`The state disk ${this.device} is locked; unlock it with its key first.`);
    return fileInMount(this.mountPoint, name);
  }
}
