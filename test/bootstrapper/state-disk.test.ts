import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cryptsetupStateDisk, openFileStateDisk, SECTOR_SIZE, StateDiskError, type FileStateDisk } from '../../bootstrapper/state-disk.js';
import { deriveStateDiskKey, generateMasterSecret } from '../../lib/kms/index.js';
import { REPO_ROOT } from '../support/cli.js';

const DISK_SIZE = 16 * 1024 * 1024;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('bootstrapper/state-disk (file)', () => {
  let dir: string;
  let file: string;
  const open: FileStateDisk[] = [];
  const openDisk = async () => {
    const disk = await openFileStateDisk(file);
    open.push(disk);
    return disk;
  };
  const key = () => new Uint8Array(randomBytes(32));
  /** What the disk file holds at byte `offset` of the data area (ciphertext). */
  const rawData = async (disk: FileStateDisk, offset: number, length: number) => {
    const raw = await fs.readFile(file);
    const dataStart = DISK_SIZE - disk.capacity;
    return raw.subarray(dataStart + offset, dataStart + offset + length);
  };

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'state-disk-'));
    file = path.join(dir, 'state-disk.img');
    // As the local provider makes it: a sparse file of the configured size, all zeros.
    const handle = await fs.open(file, 'wx', 0o600);
    await handle.truncate(DISK_SIZE);
    await handle.close();
  });

  afterEach(async () => {
    for (const disk of open.splice(0)) await disk.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives a blank disk a v4 UUID that is readable before unlock and stable across opens', async () => {
    const first = await openDisk();
    assert.match(first.uuid, UUID_V4);
    assert.equal(await first.isFormatted(), false);
    await first.format(key());
    await first.close();
    const again = await openDisk();
    assert.equal(again.uuid, first.uuid);
    assert.equal(await again.isFormatted(), true);
    // The UUID is in the plaintext header (bytes 24..40 of sector 0).
    const raw = await fs.readFile(file);
    assert.equal(raw.subarray(24, 40).toString('hex'), first.uuid.replace(/-/g, ''));
  });

  it('round-trips data and named files after format, and refuses both before', async () => {
    const disk = await openDisk();
    await assert.rejects(disk.read(0, 10), StateDiskError);
    await assert.rejects(disk.writeFile('a', new Uint8Array(1)), StateDiskError);
    await disk.format(key());
    const data = randomBytes(10_000);
    await disk.write(SECTOR_SIZE - 100, data); // spans three sectors, neither end aligned
    assert.deepEqual(Buffer.from(await disk.read(SECTOR_SIZE - 100, data.length)), data);
    assert.deepEqual(Buffer.from(await disk.read(SECTOR_SIZE - 110, 10)), Buffer.alloc(10), 'bytes never written read as zeros');
    assert.deepEqual(Buffer.from(await disk.read(disk.capacity - 8, 8)), Buffer.alloc(8));
    await assert.rejects(disk.read(disk.capacity - 8, 9), RangeError);

    assert.equal(await disk.readFile('node-state.json'), undefined);
    await disk.writeFile('node-state.json', Buffer.from('{"role":"worker"}'));
    await disk.writeFile('empty', new Uint8Array(0));
    await disk.writeFile('node-state.json', Buffer.from('{"role":"control-plane"}'));
    assert.equal(Buffer.from((await disk.readFile('node-state.json'))!).toString(), '{"role":"control-plane"}');
    assert.deepEqual(await disk.readFile('empty'), new Uint8Array(0));
  });

  it('keeps data and files across close and reopen (a reboot) with the same derived key', async () => {
    const master = generateMasterSecret();
    const disk = await openDisk();
    await disk.format(deriveStateDiskKey(master, disk.uuid));
    await disk.write(123_456, Buffer.from('written before the reboot'));
    await disk.writeFile('kubelet.conf', Buffer.from('kubelet config'));
    await disk.close();

    const rebooted = await openDisk();
    await rebooted.unlock(deriveStateDiskKey(master, rebooted.uuid));
    assert.equal(Buffer.from(await rebooted.read(123_456, 25)).toString(), 'written before the reboot');
    assert.equal(Buffer.from((await rebooted.readFile('kubelet.conf'))!).toString(), 'kubelet config');
  });

  it('keeps what a killed node process wrote: the rejoined node unlocks with the key derived again from its UUID', async () => {
    const master = generateMasterSecret();
    const child = startWriter(file, master);
    try {
      const uuid = await child.written;
      const disk = await openDisk();
      assert.equal(disk.uuid, uuid);
      await disk.unlock(deriveStateDiskKey(master, disk.uuid));
      assert.equal(Buffer.from(await disk.read(0, 13)).toString(), 'data of node1');
      assert.equal(Buffer.from((await disk.readFile('join-state'))!).toString(), 'joined');
    } finally {
      child.kill();
    }
  });

  it('refuses a wrong key without revealing either key', async () => {
    const right = key();
    const wrong = key();
    const disk = await openDisk();
    await disk.format(right);
    await disk.writeFile('secret', Buffer.from('payload'));
    await disk.close();
    const again = await openDisk();
    const err = await again.unlock(wrong).then(
      () => assert.fail('a wrong key unlocked the disk'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof StateDiskError);
    assert.match(err.message, new RegExp(`does not unlock state disk ${again.uuid}`));
    for (const k of [right, wrong]) assert.ok(!`${err.message} ${err.hint}`.includes(Buffer.from(k).toString('hex')));
    await assert.rejects(again.readFile('secret'), /locked/);
    await assert.rejects(again.unlock(new Uint8Array(16)), /32 bytes/);
  });

  it('refuses to format a formatted disk, and to unlock a blank one', async () => {
    const disk = await openDisk();
    await assert.rejects(disk.unlock(key()), /not formatted/);
    await disk.format(key());
    await assert.rejects(disk.format(key()), /already formatted/);
  });

  it('stores ciphertext: no plaintext on the file, equal sectors encrypt differently', async () => {
    const disk = await openDisk();
    await disk.format(key());
    const sector = Buffer.alloc(SECTOR_SIZE, 'constellation!');
    await disk.write(0, Buffer.concat([sector, sector]));
    await disk.writeFile('marker', Buffer.from('plaintext-marker-in-a-file'));
    const first = await rawData(disk, 0, SECTOR_SIZE);
    const second = await rawData(disk, SECTOR_SIZE, SECTOR_SIZE);
    assert.notDeepEqual(first, sector);
    assert.notDeepEqual(second, sector);
    assert.notDeepEqual(first, second);
    const raw = await fs.readFile(file);
    assert.equal(raw.indexOf('constellation!'), -1);
    assert.equal(raw.indexOf('plaintext-marker'), -1);
    assert.equal(raw.indexOf('marker'), -1, 'file names are encrypted too');
  });

  it('keeps the file its configured size and sparse', async () => {
    const disk = await openDisk();
    await disk.format(key());
    await disk.write(disk.capacity - 10, Buffer.from('at the end'));
    await disk.writeFile('f', randomBytes(100));
    await disk.close();
    const stat = await fs.stat(file);
    assert.equal(stat.size, DISK_SIZE);
    assert.ok(stat.blocks * 512 < 4 * 1024 * 1024, `only a few sectors are allocated (${stat.blocks * 512} bytes)`);
  });

  it('falls back to the older file-area copy when the newer one is damaged, and refuses when both are', async () => {
    const k = key();
    const disk = await openDisk();
    await disk.format(k);
    await disk.writeFile('f', Buffer.from('generation 1')); // slot 1
    await disk.writeFile('f', Buffer.from('generation 2')); // slot 0
    await disk.close();
    const slot0 = SECTOR_SIZE; // the file area starts at sector 1; slot 0 first
    await corrupt(file, slot0 + 70); // inside the payload
    const afterCrash = await openDisk();
    await afterCrash.unlock(k);
    assert.equal(Buffer.from((await afterCrash.readFile('f'))!).toString(), 'generation 1');
    await afterCrash.close();

    const slot1 = slot0 + (DISK_SIZE - disk.capacity - SECTOR_SIZE) / 2;
    await corrupt(file, slot1 + 70);
    const damaged = await openDisk();
    await assert.rejects(damaged.unlock(k), /damaged/);
  });

  it('refuses a file area that would overflow', async () => {
    const disk = await openDisk();
    await disk.format(key());
    await assert.rejects(disk.writeFile('big', new Uint8Array(2 * 1024 * 1024)), /file area is full/);
    assert.equal(await disk.readFile('big'), undefined);
  });

  it('refuses a file that is not blank and not a state disk, and leaves it untouched', async () => {
    const other = path.join(dir, 'other.img');
    const content = Buffer.concat([Buffer.from('some file system'), Buffer.alloc(64 * 1024)]);
    await fs.writeFile(other, content);
    await assert.rejects(openFileStateDisk(other), /not a Constellation state disk/);
    assert.deepEqual(await fs.readFile(other), content);
    await assert.rejects(openFileStateDisk(path.join(dir, 'missing.img')), /does not exist/);
  });

  it('has no LUKS disk on this machine', async () => {
    await assert.rejects(cryptsetupStateDisk('/dev/sdb'), /not available on this machine/);
  });
});

async function corrupt(file: string, position: number): Promise<void> {
  const handle = await fs.open(file, 'r+');
  try {
    await handle.write(Buffer.from('garbage'), 0, 7, position);
  } finally {
    await handle.close();
  }
}

/**
 * A node process that formats the disk with the key derived from its UUID, writes, reports the UUID and then waits:
 * the test kills it (SIGKILL, no close) as a reboot would.
 */
function startWriter(file: string, master: { key: Uint8Array; salt: Uint8Array }): { written: Promise<string>; kill(): void } {
  const moduleUrl = (p: string) => pathToFileURL(path.join(REPO_ROOT, p)).href;
  const script = `
    import { openFileStateDisk } from ${JSON.stringify(moduleUrl('bootstrapper/state-disk.ts'))};
    import { deriveStateDiskKey } from ${JSON.stringify(moduleUrl('lib/kms/index.ts'))};
    const master = { key: Buffer.from(process.env.MASTER_KEY, 'hex'), salt: Buffer.from(process.env.MASTER_SALT, 'hex') };
    const disk = await openFileStateDisk(process.env.STATE_DISK);
    await disk.format(deriveStateDiskKey(master, disk.uuid));
    await disk.write(0, Buffer.from('data of node1'));
    await disk.writeFile('join-state', Buffer.from('joined'));
    process.stdout.write(disk.uuid + '\\n');
    setInterval(() => {}, 1000);
  `;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx/esm', '--input-type=module', '--eval', script], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      STATE_DISK: file,
      MASTER_KEY: Buffer.from(master.key).toString('hex'),
      MASTER_SALT: Buffer.from(master.salt).toString('hex'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const written = new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) {
        child.kill('SIGKILL');
        resolve(out.trim());
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code) => {
      if (!out.includes('\n')) reject(new Error(`the writer exited with ${code}: ${err}`));
    });
  });
  return {
    written: written.then(async (uuid) => {
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
      return uuid;
    }),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
