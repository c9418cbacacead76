import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DiskImageError, fatType, findEspBootFile, gptPartitions, readFatFile } from '../../lib/node-image/disk.js';
import { writeEspDisk } from '../support/esp-disk.js';

describe('reading \\EFI\\BOOT\\BOOTX64.EFI from a raw GPT disk (sfdisk + mkfs.vfat + mtools)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'disk-test-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const layouts: [12 | 16 | 32, number, number][] = [
    // FAT type, ESP MiB, file bytes (several clusters, not a multiple of the cluster size)
    [12, 4, 1_500_001],
    [16, 40, 3_000_003],
    [32, 64, 5_000_005],
  ];
  for (const [fat, espMiB, size] of layouts) {
    it(`reads the file byte for byte from FAT${fat}`, () => {
      const file = randomBytes(size);
      const disk = path.join(dir, 'disk.raw');
      writeEspDisk(disk, file, { espMiB, fatSize: fat });
      const bytes = readFileSync(disk);
      const { sectorSize, partitions } = gptPartitions(bytes);
      const esp = partitions[0]!;
      assert.equal(fatType(bytes.subarray(esp.firstLba * sectorSize, (esp.lastLba + 1) * sectorSize)), fat);
      const found = findEspBootFile(bytes);
      assert.equal(found.partition, 1);
      assert.ok(found.data.equals(file));
    });
  }

  it('finds files by their long (VFAT) names, case-insensitively', () => {
    const file = randomBytes(10_000);
    const disk = path.join(dir, 'disk.raw');
    writeEspDisk(disk, file, { espMiB: 4, filePath: '::/EFI/Linux/constellation-node-image.efi' });
    const bytes = readFileSync(disk);
    const { sectorSize, partitions } = gptPartitions(bytes);
    const fs = bytes.subarray(partitions[0]!.firstLba * sectorSize, (partitions[0]!.lastLba + 1) * sectorSize);
    assert.ok(readFatFile(fs, ['efi', 'LINUX', 'Constellation-Node-Image.EFI'])?.equals(file));
    assert.equal(readFatFile(fs, ['EFI', 'Linux', 'missing.efi']), undefined);
  });

  const damaged: [string, (disk: Buffer) => Buffer, RegExp][] = [
    ['a disk cut off inside its EFI system partition', (d) => d.subarray(0, 2 * 1024 * 1024), /outside the file/],
    [
      'a GPT without an EFI system partition',
      (d) => {
        const c = Buffer.from(d);
        c.fill(0x11, 1024, 1040);
        return c;
      },
      /no EFI system partition/,
    ],
    [
      'an EFI system partition without a file system',
      (d) => {
        const c = Buffer.from(d);
        c.fill(0, 1024 * 1024, 1024 * 1024 + 512);
        return c;
      },
      /no FAT file system/,
    ],
    ['bytes that are no GPT disk', () => Buffer.alloc(8192), /not a GPT disk/],
  ];
  for (const [what, damage, message] of damaged) {
    it(`refuses ${what} with a DiskImageError`, () => {
      const disk = path.join(dir, 'disk.raw');
      writeEspDisk(disk, randomBytes(100), { espMiB: 4 });
      assert.throws(
        () => findEspBootFile(damage(readFileSync(disk))),
        (e: unknown) => e instanceof DiskImageError && message.test(e.message),
      );
    });
  }
});
