/**
 * Writes a raw GPT disk whose EFI system partition (FAT, made by mkfs.vfat) holds one file at
 * \EFI\BOOT\BOOTX64.EFI: the removable-media path UEFI firmware boots without any boot entry. The tests of the
 * read side (lib/node-image/disk.ts) and the measured-boot proof use it with the Debian tools a node image build
 * uses (sfdisk, mkfs.vfat, mtools), so our reader is checked against the file systems they make.
 * Fixed disk and partition GUIDs, volume ID and --invariant: the same UKI gives the same disk bytes.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';

const MIB = 1024 * 1024;
export const ESP_TYPE_GUID = 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B';

export interface EspDiskOptions {
  /** ESP size in MiB; default: room for the file plus 8 MiB, at least 40 MiB. */
  espMiB?: number;
  /** mkfs.vfat -F (12, 16 or 32); default: mkfs.vfat's choice for the size. */
  fatSize?: 12 | 16 | 32;
  /** Where the file goes inside the ESP (mtools path). */
  filePath?: string;
}

/** Writes `diskPath` (a raw GPT disk with one ESP holding `file`); scratch files go next to it and are removed. */
export function writeEspDisk(diskPath: string, file: Buffer, options: EspDiskOptions = {}): void {
  const espMiB = options.espMiB ?? Math.max(40, Math.ceil(file.length / MIB) + 8);
  const espPath = `${diskPath}.esp`;
  try {
    const mkfsArgs = ['--invariant', '-i', '4e4f4445', '-n', 'ESP', '-C', espPath, String(espMiB * 1024)];
    if (options.fatSize) mkfsArgs.unshift('-F', String(options.fatSize));
    execFileSync('mkfs.vfat', mkfsArgs, { stdio: 'pipe' });
    const uki = `${diskPath}.file`;
    writeFileSync(uki, file);
    const env = { ...process.env, MTOOLS_SKIP_CHECK: '1', SOURCE_DATE_EPOCH: '0' };
    const target = options.filePath ?? '::/EFI/BOOT/BOOTX64.EFI';
    const dirs = target.replace(/^::/, '').split('/').slice(1, -1);
    for (let i = 1; i <= dirs.length; i++)
      execFileSync('mmd', ['-i', espPath, `::/${dirs.slice(0, i).join('/')}`], { env, stdio: 'pipe' });
    execFileSync('mcopy', ['-m', '-i', espPath, uki, target], { env, stdio: 'pipe' });
    rmSync(uki);
    const totalBytes = (espMiB + 2) * MIB;
    writeFileSync(diskPath, Buffer.alloc(0));
    const fd = openSync(diskPath, 'r+');
    try {
      writeSync(fd, Buffer.alloc(1), 0, 1, totalBytes - 1);
      writeSync(fd, readFileSync(espPath), 0, undefined, MIB);
    } finally {
      closeSync(fd);
    }
    const script = [
      'label: gpt',
      'label-id: 0E6E3A1C-4B52-4A3B-9E51-3C9B1D2F0A01',
      'unit: sectors',
      `start=2048, size=${espMiB * 2048}, type=${ESP_TYPE_GUID}, uuid=1D2A3B4C-5E6F-4A7B-8C9D-0E1F2A3B4C5D, name="ESP"`,
      '',
    ].join('\n');
    execFileSync('sfdisk', ['--no-reread', '--no-tell-kernel', '-q', diskPath], {
      input: script,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  } finally {
    rmSync(espPath, { force: true });
  }
}

export function espDiskPath(dir: string): string {
  return path.join(dir, 'disk.raw');
}
