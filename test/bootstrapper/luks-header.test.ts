/**
 * The state disk's LUKS header read without cryptsetup (bootstrapper/state-disk/luks-header.ts), against headers the
 * real cryptsetup wrote on disk images: each reading is compared with what `cryptsetup isLuks` and `luksUUID` say
 * of the same bytes, and every reading other than "blank" or a certain LUKS2 UUID leaves the decision to cryptsetup.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openLuksStateDisk, testPassphraseActivator, type RunCommand } from '../../bootstrapper/state-disk.js';
import { spawnCommand } from '../../bootstrapper/state-disk/cryptsetup.js';
import { readLuksHeader } from '../../bootstrapper/state-disk/luks-header.js';
import { requireTool } from '../support/require-tool.js';

const hasCryptsetup = spawnSync('cryptsetup', ['--version'], { stdio: 'ignore' }).status === 0;
const SIZE = 32 * 1024 * 1024;

describe('bootstrapper/state-disk/luks-header (the header read without cryptsetup)', function () {
  this.timeout(30_000);
  let dir: string;
  let luks1: string;
  let luks2: string;
  let luks2Uuid: string;

  /** An image of SIZE bytes: blank, or formatted by cryptsetup. */
  const image = async (name: string, type?: 'luks1' | 'luks2') => {
    const file = path.join(dir, name);
    await fs.writeFile(file, '');
    await fs.truncate(file, SIZE);
    if (type) {
      execFileSync(
        'cryptsetup',
        [
          'luksFormat',
          '--batch-mode',
          '--type',
          type,
          '--pbkdf',
          'pbkdf2',
          '--pbkdf-force-iterations',
          '1000',
          '--key-file',
          '-',
          file,
        ],
        { input: randomBytes(32), stdio: ['pipe', 'ignore', 'ignore'], timeout: 20_000 },
      );
    }
    return file;
  };
  /** A copy of `from` with `bytes` written at `offset`. */
  const damaged = async (from: string, name: string, offset: number, bytes: Buffer) => {
    const file = path.join(dir, name);
    await fs.copyFile(from, file);
    const handle = await fs.open(file, 'r+');
    await handle.write(bytes, 0, bytes.length, offset);
    await handle.close();
    return file;
  };
  /** What cryptsetup says of the file, on a copy (loading a LUKS2 header with a damaged copy repairs it in place). */
  const cryptsetupSays = async (file: string) => {
    const copy = `${file}.cryptsetup`;
    await fs.copyFile(file, copy);
    try {
      const formatted = spawnSync('cryptsetup', ['isLuks', copy]).status === 0;
      const uuid = formatted ? execFileSync('cryptsetup', ['luksUUID', copy], { encoding: 'utf8' }).trim() : undefined;
      return { formatted, uuid };
    } finally {
      await fs.rm(copy);
    }
  };

  before(async function () {
    requireTool(this, hasCryptsetup, 'cryptsetup');
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'luks-header-'));
    luks1 = await image('luks1.img', 'luks1');
    luks2 = await image('luks2.img', 'luks2');
    luks2Uuid = execFileSync('cryptsetup', ['luksUUID', luks2], { encoding: 'utf8' }).trim();
  });
  after(async () => {
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  it('reads the UUID of a LUKS2 header cryptsetup wrote, as luksUUID prints it (lower case)', async () => {
    assert.deepEqual(await readLuksHeader(luks2), { kind: 'luks2', uuid: luks2Uuid.toLowerCase() });
    assert.deepEqual(await cryptsetupSays(luks2), { formatted: true, uuid: luks2Uuid });
  });

  it('calls a disk blank only where cryptsetup finds no header: zeros, random bytes, both LUKS2 copies wiped', async () => {
    const random = await damaged(await image('random.img'), 'random.img', 0, randomBytes(8 * 1024 * 1024));
    const wiped = await damaged(luks2, 'wiped.img', 0, Buffer.alloc(32 * 1024)); // primary and secondary (16 KiB)
    for (const file of [await image('blank.img'), random, wiped]) {
      assert.deepEqual(await readLuksHeader(file), { kind: 'blank' }, path.basename(file));
      assert.deepEqual(await cryptsetupSays(file), { formatted: false, uuid: undefined }, path.basename(file));
    }
  });

  // Each of these cryptsetup still loads (from the secondary copy, or as LUKS1): the reader must not say "blank".
  const unsure: Array<[string, () => Promise<string>]> = [
    ['a LUKS1 header', async () => luks1],
    [
      'a LUKS2 primary header wiped (the secondary copy is intact)',
      () => damaged(luks2, 'no-primary.img', 0, Buffer.alloc(4096)),
    ],
    [
      'a byte of the primary JSON area changed (checksum wrong)',
      () => damaged(luks2, 'json.img', 5000, Buffer.from('X')),
    ],
    [
      'the primary UUID field changed (checksum wrong)',
      async () => {
        // Another hex digit than the UUID's first (a fixed one left the header unchanged for one UUID in 16).
        const handle = await fs.open(luks2, 'r');
        const { buffer } = await handle.read(Buffer.alloc(1), 0, 1, 168);
        await handle.close();
        const first = buffer.toString('latin1');
        return damaged(luks2, 'uuid.img', 168, Buffer.from(first === '0' ? '1' : '0'));
      },
    ],
  ];
  for (const [what, make] of unsure) {
    it(`leaves ${what} to cryptsetup, which finds it formatted`, async () => {
      const file = await make();
      assert.deepEqual(await readLuksHeader(file), { kind: 'unsure' });
      assert.equal((await cryptsetupSays(file)).formatted, true);
    });
  }

  it('leaves a device it cannot read to cryptsetup', async () => {
    assert.deepEqual(await readLuksHeader(path.join(dir, 'missing.img')), { kind: 'unsure' });
  });

  it('opens the state disk without spawning cryptsetup for a blank disk and a LUKS2 disk, and with it otherwise', async () => {
    const calls: string[][] = [];
    const run: RunCommand = (program, args, stdin) => {
      calls.push([program, ...args]);
      return spawnCommand(program, args, stdin);
    };
    const open = (device: string) =>
      openLuksStateDisk(device, { run, activator: testPassphraseActivator({ run }), mountPoint: path.join(dir, 'm') });

    const blank = await open(await image('open-blank.img'));
    assert.equal(await blank.isFormatted(), false);
    const formatted = await open(luks2);
    assert.equal(await formatted.isFormatted(), true);
    assert.equal(formatted.uuid, luks2Uuid.toLowerCase());
    assert.equal(calls.length, 0, 'no cryptsetup');

    const noPrimary = await open(await damaged(luks2, 'open-no-primary.img', 0, Buffer.alloc(4096)));
    assert.equal(await noPrimary.isFormatted(), true);
    assert.equal(noPrimary.uuid, luks2Uuid.toLowerCase());
    assert.deepEqual(
      calls.map((c) => c.slice(0, 2)),
      [
        ['cryptsetup', 'isLuks'],
        ['cryptsetup', 'luksUUID'],
      ],
    );
  });
});
