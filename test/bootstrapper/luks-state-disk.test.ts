/**
 * The LUKS2 state disk of cloud nodes with the real cryptsetup on a disk image. These machines have no
 * device-mapper, so activation is the test-passphrase activator: what is checked is everything up to the mapping —
 * the LUKS2 header cryptsetup writes (UUID, cipher, key size, label), that the derived key opens it and another key
 * does not (exactly as `cryptsetup open` decides), and the files kept on the volume.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  deviceMapperActivator,
  openLuksStateDisk,
  StateDiskError,
  testPassphraseActivator,
  type LuksStateDisk,
  type RunCommand,
} from '../../bootstrapper/state-disk.js';
import { deriveStateDiskKey, generateMasterSecret } from '../../lib/kms/index.js';
import { requireTool } from '../support/require-tool.js';

const hasCryptsetup = spawnSync('cryptsetup', ['--version'], { stdio: 'ignore' }).status === 0;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('bootstrapper/state-disk (LUKS2 with cryptsetup)', function () {
  this.timeout(30_000);
  let dir: string;
  let device: string;
  const opened: LuksStateDisk[] = [];
  const open = async (mount = 'mnt') => {
    const disk = await openLuksStateDisk(device, {
      mountPoint: path.join(dir, mount),
      activator: testPassphraseActivator(),
    });
    opened.push(disk);
    return disk;
  };
  const luksDump = () =>
    JSON.parse(execFileSync('cryptsetup', ['luksDump', '--dump-json-metadata', device], { encoding: 'utf8' })) as {
      keyslots: Record<string, { kdf: { type: string } }>;
      segments: Record<string, { encryption: string }>;
    };
  const luksLabel = () =>
    /^Label:\s*(\S*)/m.exec(execFileSync('cryptsetup', ['luksDump', device], { encoding: 'utf8' }))?.[1];

  before(function () {
    requireTool(this, hasCryptsetup, 'cryptsetup');
  });
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'luks-disk-'));
    device = path.join(dir, 'state-disk.img');
    await fs.writeFile(device, '');
    await fs.truncate(device, 32 * 1024 * 1024); // a blank cloud disk: zeros
  });
  afterEach(async () => {
    for (const disk of opened.splice(0)) await disk.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('formats a blank disk with the derived key: a LUKS2 header with the UUID the key was derived for', async () => {
    const disk = await open();
    assert.match(disk.uuid, UUID_V4);
    assert.equal(await disk.isFormatted(), false);
    const key = deriveStateDiskKey(generateMasterSecret(), disk.uuid);
    await disk.format(key);
    assert.equal(await disk.isFormatted(), true);
    assert.equal(execFileSync('cryptsetup', ['luksUUID', device], { encoding: 'utf8' }).trim(), disk.uuid);
    const dump = luksDump();
    assert.equal(dump.segments['0'].encryption, 'aes-xts-plain64');
    assert.equal(dump.keyslots['0'].kdf.type, 'pbkdf2');
    assert.equal(luksLabel(), 'constellation-state');
    assert.ok(!(await fs.readFile(device)).includes(Buffer.from(key)), 'the key is not on the disk');
  });

  it('reopens a formatted disk with the UUID from its header; the key unlocks it, another key is refused', async () => {
    const first = await open();
    const master = generateMasterSecret();
    await first.format(deriveStateDiskKey(master, first.uuid));
    await first.writeFile('constellation/cluster.json', Buffer.from('{"clusterId":"00"}'));
    await first.close();

    const again = await open();
    assert.equal(again.uuid, first.uuid);
    assert.equal(await again.isFormatted(), true);
    await assert.rejects(
      again.unlock(deriveStateDiskKey(generateMasterSecret(), again.uuid)),
      (err: Error) => err instanceof StateDiskError && /does not open the state disk/.test(err.message),
    );
    await assert.rejects(again.readFile('constellation/cluster.json'), /locked/);
    await again.unlock(deriveStateDiskKey(master, again.uuid));
    assert.equal(Buffer.from((await again.readFile('constellation/cluster.json'))!).toString(), '{"clusterId":"00"}');
    assert.equal(await again.readFile('missing'), undefined);
    await assert.rejects(again.format(deriveStateDiskKey(master, again.uuid)), /already formatted/);
  });

  it('keeps its files below the mount point, where the node puts everything it keeps', async () => {
    const disk = await open();
    assert.equal(disk.mountPoint, path.join(dir, 'mnt'));
    await disk.format(randomBytes(32));
    await disk.writeFile('joinservice/ca.key', Buffer.from('secret'));
    assert.equal(await fs.readFile(path.join(disk.mountPoint, 'joinservice/ca.key'), 'utf8'), 'secret');
    assert.equal((await fs.stat(path.join(disk.mountPoint, 'joinservice/ca.key'))).mode & 0o777, 0o600);
  });

  it('refuses keys of the wrong size, file names that leave the volume, and a missing device', async () => {
    const disk = await open();
    await assert.rejects(disk.format(randomBytes(16)), /32 bytes/);
    await disk.format(randomBytes(32));
    await assert.rejects(disk.writeFile('../escape', Buffer.from('x')), /not a file name inside the state disk/);
    await assert.rejects(openLuksStateDisk(path.join(dir, 'missing.img')), /does not exist/);
  });

  it('on a cloud node maps, makes a file system once and mounts; a wrong key stops at the mapping', async () => {
    const calls: string[][] = [];
    const run: RunCommand = async (program, args) => {
      calls.push([program, ...args]);
      if (program === 'cryptsetup' && args[0] === 'open' && calls.filter((c) => c[1] === 'open').length > 1)
        return { code: 2, stdout: '', stderr: 'No key available with this passphrase.' };
      if (program === 'blockdev') return { code: 0, stdout: '1073741824\n', stderr: '' }; // 1 GiB: 262144 blocks of 4096
      return { code: 0, stdout: '', stderr: '' };
    };
    const mountPoint = path.join(dir, 'state');
    const activator = deviceMapperActivator({ run });
    await activator.activate('/dev/sdb', randomBytes(32), { fresh: true, mountPoint });
    assert.deepEqual(calls, [
      ['cryptsetup', 'open', '--type', 'luks2', '--key-file', '-', '/dev/sdb', 'state'],
      // Not wiped at format: the areas libblkid probes get valid integrity tags before mkfs reads them.
      ['blockdev', '--getsize64', '/dev/mapper/state'],
      ['dd', 'if=/dev/zero', 'of=/dev/mapper/state', 'bs=4096', 'count=512', 'seek=0', 'conv=fsync'],
      ['dd', 'if=/dev/zero', 'of=/dev/mapper/state', 'bs=4096', 'count=512', 'seek=261632', 'conv=fsync'],
      [
        'mkfs.ext4',
        '-q',
        '-F',
        '-O',
        'sparse_super2,^resize_inode',
        '-E',
        'num_backup_sb=0,lazy_itable_init=0,lazy_journal_init=0,nodiscard',
        '/dev/mapper/state',
      ],
      ['mount', '/dev/mapper/state', mountPoint],
    ]);
    await assert.rejects(
      activator.activate('/dev/sdb', randomBytes(32), { fresh: false, mountPoint }),
      /does not open the state disk/,
    );
    assert.equal(calls.length, 7, 'nothing after a refused key');
  });

  it('on a cloud node formats with dm-integrity (hmac-sha256, 4096-byte sectors, not wiped); without device-mapper it cannot and does not', async () => {
    const calls: string[][] = [];
    const run: RunCommand = async (program, args) => {
      calls.push([program, ...args]);
      if (args[0] === 'isLuks') return { code: 1, stdout: '', stderr: '' };
      return { code: 0, stdout: '', stderr: '' };
    };
    const format = async (activator: ReturnType<typeof deviceMapperActivator>) => {
      calls.length = 0;
      const disk = await openLuksStateDisk(device, { run, activator, mountPoint: path.join(dir, 'state') });
      await disk.format(randomBytes(32));
      return calls.find((c) => c[1] === 'luksFormat')!;
    };
    const cloud = await format(deviceMapperActivator({ run }));
    assert.deepEqual(cloud.slice(cloud.indexOf('--integrity'), cloud.indexOf('--integrity') + 5), [
      '--integrity',
      'hmac-sha256',
      '--integrity-no-wipe',
      '--sector-size',
      '4096',
    ]);
    assert.ok(!(await format(testPassphraseActivator({ run }))).includes('--integrity'));
  });
});
