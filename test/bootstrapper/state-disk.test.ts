/**
 * The local nodes' state disk: a real gocryptfs directory mounted with FUSE (needs gocryptfs, fuse3 and /dev/fuse,
 * which `npm test` installs). Every test mounts below its own temp folder and unmounts in afterEach.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { openGocryptfsStateDisk, StateDiskError, type GocryptfsStateDisk } from '../../bootstrapper/state-disk.js';
import { writeGocryptfsConfig } from '../../bootstrapper/state-disk/gocryptfs.js';
import { deriveStateDiskKey, generateMasterSecret } from '../../lib/kms/index.js';
import { REPO_ROOT } from '../support/cli.js';
import { pollUntil } from '../../lib/poll.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Every file below `dir` with its content, recursively. */
async function tree(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) {
      const file = path.join(entry.parentPath, entry.name);
      out.set(path.relative(dir, file), await fs.readFile(file));
    }
  }
  return out;
}

async function mounted(dir: string): Promise<boolean> {
  return (await fs.readFile('/proc/self/mounts', 'utf8')).split('\n').some((line) => line.split(' ')[1] === dir);
}

describe('bootstrapper/state-disk (gocryptfs)', function () {
  this.timeout(20_000);
  let dir: string;
  let diskDir: string;
  let mountPoint: string;
  const open: GocryptfsStateDisk[] = [];
  const openDisk = async (options: { mountPoint?: string; diskDir?: string } = {}) => {
    const disk = await openGocryptfsStateDisk({
      diskDir: options.diskDir ?? diskDir,
      mountPoint: options.mountPoint ?? mountPoint,
    });
    open.push(disk);
    return disk;
  };
  const key = () => new Uint8Array(randomBytes(32));

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'state-disk-'));
    diskDir = path.join(dir, 'state-disk');
    mountPoint = path.join(dir, 'state');
  });

  afterEach(async () => {
    for (const disk of open.splice(0)) await disk.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives a new disk a v4 UUID that is readable before unlock and stable across opens', async () => {
    const first = await openDisk();
    assert.match(first.uuid, UUID_V4);
    assert.equal(await first.isFormatted(), false);
    await first.format(key());
    await first.close();
    const again = await openDisk();
    assert.equal(again.uuid, first.uuid);
    assert.equal(await again.isFormatted(), true);
    assert.equal((await fs.readFile(path.join(diskDir, 'uuid'), 'utf8')).trim(), first.uuid);
  });

  it('mounts at the mount point after format; the backing folder holds only ciphertext', async () => {
    const disk = await openDisk();
    await disk.format(key());
    assert.ok(await mounted(mountPoint));
    const secret = 'kubelet private key material of this node';
    await disk.writeFile('kubelet/kubelet.key', Buffer.from(secret));
    await fs.writeFile(path.join(mountPoint, 'etcd-member.txt'), secret); // any program of the node writes there too
    assert.equal(Buffer.from((await disk.readFile('kubelet/kubelet.key'))!).toString(), secret);
    const backing = await tree(path.join(diskDir, 'cipher'));
    assert.ok(backing.size >= 3, 'gocryptfs.conf, gocryptfs.diriv and the encrypted files');
    for (const [name, content] of backing) {
      assert.ok(!name.includes('kubelet') && !name.includes('etcd'), `file names are encrypted: ${name}`);
      assert.ok(!content.includes(Buffer.from('private key material')), `${name} holds plaintext`);
    }
  });

  it('one gocryptfs process, started by the node itself, serves the mount in a session of its own and ends with the unmount', async () => {
    const disk = await openDisk();
    await disk.format(key());
    const servers: number[] = [];
    for (const pid of (await fs.readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
      const args = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (args.split('\0').includes(mountPoint)) servers.push(Number(pid));
    }
    assert.equal(servers.length, 1, `one server of ${mountPoint}: ${servers.join(', ')}`);
    // /proc/<pid>/stat: "pid (comm) state ppid pgrp session ..."; the comm holds no ")" here.
    const stat = (await fs.readFile(`/proc/${servers[0]}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    // Started by this process itself, not by a gocryptfs that started it and exited (two Go starts per mount).
    assert.equal(Number(stat[1]), process.pid, 'its parent is the process that mounted');
    assert.equal(Number(stat[3]), servers[0], 'it leads its own session, as a daemon');
    await disk.close();
    const gone = () =>
      fs.access(`/proc/${servers[0]}`).then(
        () => undefined,
        () => true,
      );
    await pollUntil(gone, { timeoutMs: 5000, intervalMs: 20, what: 'gocryptfs to end with its unmount' });
  });

  it('names a gocryptfs that is not installed, with what to install', async () => {
    const disk = await openGocryptfsStateDisk({ diskDir, mountPoint, gocryptfsBinary: path.join(dir, 'no-gocryptfs') });
    open.push(disk);
    await assert.rejects(
      disk.format(key()),
      (err: Error) =>
        err instanceof StateDiskError && /is not installed/.test(err.message) && /fuse3/.test(err.hint ?? ''),
    );
    assert.equal(await mounted(mountPoint), false);
  });

  it('formats as `gocryptfs -init -scryptn 10` does: the same files, modes, parameters and feature flags', async () => {
    const ours = path.join(dir, 'ours');
    const theirs = path.join(dir, 'theirs');
    await fs.mkdir(ours);
    await fs.mkdir(theirs);
    const password = Buffer.from(key()).toString('hex');
    await writeGocryptfsConfig(ours, password);
    const init = spawn('gocryptfs', ['-init', '-q', '-nosyslog', '-scryptn', '10', theirs], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    init.stdin!.end(password);
    assert.equal(await new Promise((resolve) => init.once('exit', resolve)), 0);
    const describe = async (folder: string) => {
      const files = (await fs.readdir(folder)).sort();
      const modes = await Promise.all(files.map(async (f) => (await fs.stat(path.join(folder, f))).mode & 0o777));
      const config = JSON.parse(await fs.readFile(path.join(folder, 'gocryptfs.conf'), 'utf8'));
      const { Salt, ...scrypt } = config.ScryptObject;
      return {
        files,
        modes,
        diriv: (await fs.readFile(path.join(folder, 'gocryptfs.diriv'))).length,
        keys: Object.keys(config).sort(),
        encryptedKey: Buffer.from(config.EncryptedKey, 'base64').length,
        salt: Buffer.from(Salt, 'base64').length,
        scrypt,
        version: config.Version,
        flags: [...config.FeatureFlags].sort(),
      };
    };
    assert.deepEqual(await describe(ours), await describe(theirs));
  });

  it('refuses to read or write while locked, and names outside the disk', async () => {
    const disk = await openDisk();
    await assert.rejects(disk.readFile('x'), (e: Error) => e instanceof StateDiskError && /locked/.test(e.message));
    await disk.format(key());
    for (const name of ['../outside', '/etc/passwd', ''])
      await assert.rejects(disk.writeFile(name, Buffer.from('x')), StateDiskError);
    assert.equal(await disk.readFile('missing'), undefined);
  });

  it('unlocks with its key after a close; a wrong key is refused and changes nothing', async () => {
    const right = key();
    const disk = await openDisk();
    await disk.format(right);
    await disk.writeFile('data', Buffer.from('written before the reboot'));
    await disk.close();
    const before = await tree(path.join(diskDir, 'cipher'));

    const again = await openDisk();
    await assert.rejects(
      again.unlock(key()),
      (e: Error) => e instanceof StateDiskError && /does not unlock the state disk/.test(e.message),
    );
    assert.equal(await mounted(mountPoint), false);
    assert.deepEqual(await tree(path.join(diskDir, 'cipher')), before, 'a wrong key changed nothing on the disk');
    await assert.rejects(again.format(right), /formatted already/);
    await again.unlock(right);
    assert.equal(Buffer.from((await again.readFile('data'))!).toString(), 'written before the reboot');
  });

  it("cannot be mounted with another node's key", async () => {
    const master = generateMasterSecret();
    const a = await openDisk();
    await a.format(deriveStateDiskKey(master, a.uuid));
    await a.close();
    const b = await openDisk({ diskDir: path.join(dir, 'disk-b'), mountPoint: path.join(dir, 'state-b') });
    const again = await openDisk();
    await assert.rejects(again.unlock(deriveStateDiskKey(master, b.uuid)), StateDiskError);
    await again.unlock(deriveStateDiskKey(master, a.uuid));
  });

  it('refuses keys of the wrong length, and never puts the key on a command line', async () => {
    const disk = await openDisk();
    await assert.rejects(disk.format(new Uint8Array(16)), /32 bytes/);
    const k = key();
    await disk.format(k);
    const hex = Buffer.from(k).toString('hex');
    for (const pid of (await fs.readdir('/proc')).filter((e) => /^\d+$/.test(e))) {
      const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      assert.ok(!cmdline.includes(hex), `the key is on the command line of ${pid}`);
    }
  });

  it('after its node was killed (gocryptfs too, no unmount), the next boot clears the dead mount and unlocks', async () => {
    const master = generateMasterSecret();
    const writer = startWriter(diskDir, mountPoint, master);
    const uuid = await writer.done;
    // The node and its gocryptfs die as in a power cut: the mount is left dead.
    for (const pid of await gocryptfsPidsOf(path.join(diskDir, 'cipher'))) process.kill(pid, 'SIGKILL');
    await waitUntil(async () => (await gocryptfsPidsOf(path.join(diskDir, 'cipher'))).length === 0);
    const disk = await openDisk();
    assert.equal(disk.uuid, uuid);
    await disk.unlock(deriveStateDiskKey(master, uuid));
    assert.equal(Buffer.from((await disk.readFile('join-state'))!).toString(), 'joined');
  });
});

async function gocryptfsPidsOf(cipherDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = (await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (path.basename(argv[0] ?? '') === 'gocryptfs' && argv.includes(cipherDir)) pids.push(Number(entry));
  }
  return pids;
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  await pollUntil(async () => (await check()) || undefined, { timeoutMs, intervalMs: 20, what: 'the condition' });
}

/** A node process that formats the disk with the key derived from its UUID, writes a file, reports the UUID and is killed. */
function startWriter(
  diskDir: string,
  mountPoint: string,
  master: { key: Uint8Array; salt: Uint8Array },
): { done: Promise<string> } {
  const moduleUrl = (p: string) => pathToFileURL(path.join(REPO_ROOT, p)).href;
  const script = `
    import { openGocryptfsStateDisk } from ${JSON.stringify(moduleUrl('bootstrapper/state-disk.ts'))};
    import { deriveStateDiskKey } from ${JSON.stringify(moduleUrl('lib/kms/index.ts'))};
    const master = { key: Buffer.from(process.env.MASTER_KEY, 'hex'), salt: Buffer.from(process.env.MASTER_SALT, 'hex') };
    const disk = await openGocryptfsStateDisk({ diskDir: process.env.DISK_DIR, mountPoint: process.env.MOUNT_POINT });
    await disk.format(deriveStateDiskKey(master, disk.uuid));
    await disk.writeFile('join-state', Buffer.from('joined'));
    process.stdout.write(disk.uuid + '\\n');
    setInterval(() => {}, 1000);
  `;
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx/esm', '--input-type=module', '--eval', script],
    {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        DISK_DIR: diskDir,
        MOUNT_POINT: mountPoint,
        MASTER_KEY: Buffer.from(master.key).toString('hex'),
        MASTER_SALT: Buffer.from(master.salt).toString('hex'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const done = new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) child.kill('SIGKILL');
    });
    child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', () => (out.includes('\n') ? resolve(out.trim()) : reject(new Error(`the writer failed: ${err}`))));
  });
  return { done };
}
