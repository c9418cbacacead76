/**
 * The raw disk of a node image: GPT, one EFI system partition (FAT32) holding exactly one file,
 * \EFI\BOOT\BOOTX64.EFI (the UKI), which UEFI firmware boots without any boot entry. Reproducible: the FAT is made
 * by mkfs.vfat with a fixed volume id and --invariant (no time or random value), the file and its folders get one
 * fixed time (SOURCE_DATE_EPOCH, FAT cannot hold dates before 1980) before mcopy -m copies them, and sgdisk writes
 * the GPT with disk and partition GUIDs derived from the UKI's digest. Layout: 1 MiB for the GPT, the ESP sized from
 * the UKI (rounded up to 8 MiB), 1 MiB for the backup GPT; the whole disk is a multiple of 1 MiB (1 GiB for GCE)
 * (docs/workflows/node-images.md).
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { runChecked, type CommandRunner } from './tools.js';

const MiB = 1024 * 1024;
/** The time every file of the ESP carries when SOURCE_DATE_EPOCH is unset: 2020-01-01T00:00:00Z. */
export const DEFAULT_FAT_TIME = 1577836800;
const EFI_SYSTEM_PARTITION = 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B';

/** A GUID string (RFC 4122 variant, version 4 bits) from the first bytes of SHA-256(label, seed). */
export function derivedGuid(seed: string, label: string): string {
  const b = createHash('sha256').update(label).update('\0').update(seed).digest().subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex').toUpperCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function espSizeFor(ukiSize: number): number {
  const min = 40 * MiB; // FAT32 with 512-byte clusters needs 65525 clusters
  return Math.max(min, Math.ceil((ukiSize * 1.05 + 4 * MiB) / (8 * MiB)) * 8 * MiB);
}

export interface RawDiskOptions {
  uki: Buffer;
  out: string;
  workDir: string;
  run: CommandRunner;
  /** Seconds since the epoch for the FAT's file times (SOURCE_DATE_EPOCH). */
  time?: number;
  /** The disk's size is a multiple of this (default 1 MiB; GCE wants 1 GiB). */
  alignment?: number;
}

/** Writes the raw disk to `out`; returns its layout. */
export async function writeRawDisk(
  options: RawDiskOptions,
): Promise<{ size: number; espOffset: number; espSize: number; diskGuid: string; partitionGuid: string }> {
  const { uki, out, workDir, run } = options;
  const seed = createHash('sha256').update(uki).digest('hex');
  const time = Math.max(options.time ?? DEFAULT_FAT_TIME, 315532800 + 86400); // FAT starts in 1980
  const espSize = espSizeFor(uki.length);
  const espOffset = MiB;
  const alignment = options.alignment ?? MiB;
  const size = Math.ceil((espOffset + espSize + MiB) / alignment) * alignment;

  const tree = path.join(workDir, 'esp-tree');
  const bootDir = path.join(tree, 'EFI', 'BOOT');
  await fs.mkdir(bootDir, { recursive: true });
  const bootFile = path.join(bootDir, 'BOOTX64.EFI');
  await fs.writeFile(bootFile, uki);
  for (const p of [bootFile, bootDir, path.join(tree, 'EFI')]) await fs.utimes(p, time, time);

  const esp = path.join(workDir, 'esp.img');
  await fs.rm(esp, { force: true });
  await fs.writeFile(esp, '');
  await fs.truncate(esp, espSize);
  const volumeId = seed.slice(0, 8);
  await runChecked(run, 'mkfs.vfat', ['-F', '32', '-s', '1', '-i', volumeId, '--invariant', '-n', 'ESP', esp]);
  await runChecked(run, 'mcopy', ['-s', '-m', '-i', esp, path.join(tree, 'EFI'), '::'], {
    env: { ...process.env, MTOOLS_SKIP_CHECK: '1', SOURCE_DATE_EPOCH: String(time) },
  });

  const diskGuid = derivedGuid(seed, 'disk');
  const partitionGuid = derivedGuid(seed, 'esp');
  await fs.rm(out, { force: true });
  await fs.writeFile(out, '');
  await fs.truncate(out, size);
  await runChecked(run, 'sgdisk', [
    '--clear',
    `--disk-guid=${diskGuid}`,
    `--new=1:${espOffset / 512}:${(espOffset + espSize) / 512 - 1}`,
    `--typecode=1:${EFI_SYSTEM_PARTITION}`,
    `--partition-guid=1:${partitionGuid}`,
    '--change-name=1:ESP',
    out,
  ]);
  // The FAT goes into the partition's place.
  const handle = await fs.open(out, 'r+');
  try {
    const src = await fs.open(esp, 'r');
    try {
      const chunk = Buffer.alloc(4 * MiB);
      for (let pos = 0; pos < espSize; pos += chunk.length) {
        const { bytesRead } = await src.read(chunk, 0, chunk.length, pos);
        await handle.write(chunk, 0, bytesRead, espOffset + pos);
      }
    } finally {
      await src.close();
    }
  } finally {
    await handle.close();
  }
  await fs.rm(esp, { force: true });
  await fs.rm(tree, { recursive: true, force: true });
  return { size, espOffset, espSize, diskGuid, partitionGuid };
}
