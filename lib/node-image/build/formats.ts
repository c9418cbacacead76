/**
 * The clouds' upload formats, each a conversion of the same raw disk, written deterministically
 * (docs/workflows/node-images.md):
 *   - Azure: a fixed VHD, the raw disk (a multiple of 1 MiB, as Azure requires) followed by the 512-byte VHD footer
 *     (Microsoft's VHD specification; time stamp 0, unique id derived from the disk's digest).
 *   - GCE: `disk.raw` in a gzip-compressed GNU tar (what `gcloud compute images create --source-uri` reads), one
 *     member with fixed owner, mode and time, gzip with no name and time 0.
 *   - AWS: the raw disk itself (`aws ec2 import-snapshot --disk-container Format=RAW`).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';

/** CHS geometry of a VHD of this many bytes (VHD specification, appendix "CHS calculation"). */
export function vhdGeometry(size: number): { cylinders: number; heads: number; sectorsPerTrack: number } {
  let total = Math.floor(size / 512);
  if (total > 65535 * 16 * 255) total = 65535 * 16 * 255;
  let spt: number;
  let heads: number;
  let cth: number;
  if (total >= 65535 * 16 * 63) {
    spt = 255;
    heads = 16;
    cth = Math.floor(total / spt);
  } else {
    spt = 17;
    cth = Math.floor(total / spt);
    heads = Math.max(4, Math.floor((cth + 1023) / 1024));
    if (cth >= heads * 1024 || heads > 16) {
      spt = 31;
      heads = 16;
      cth = Math.floor(total / spt);
    }
    if (cth >= heads * 1024) {
      spt = 63;
      heads = 16;
      cth = Math.floor(total / spt);
    }
  }
  return { cylinders: Math.floor(cth / heads), heads, sectorsPerTrack: spt };
}

/** The 512-byte footer of a fixed VHD of `size` bytes. */
export function vhdFooter(size: number, uniqueId: Buffer): Buffer {
  const f = Buffer.alloc(512);
  f.write('conectix', 0, 'ascii');
  f.writeUInt32BE(2, 8); // features: reserved bit set
  f.writeUInt32BE(0x00010000, 12); // format version
  f.writeBigUInt64BE(0xffffffffffffffffn, 16); // data offset: none (fixed disk)
  f.writeUInt32BE(0, 24); // time stamp: fixed, for reproducibility
  f.write('ctsn', 28, 'ascii'); // creator application
  f.writeUInt32BE(0x00010000, 32); // creator version
  f.write('Wi2k', 36, 'ascii'); // creator host OS
  f.writeBigUInt64BE(BigInt(size), 40); // original size
  f.writeBigUInt64BE(BigInt(size), 48); // current size
  const g = vhdGeometry(size);
  f.writeUInt16BE(g.cylinders, 56);
  f.writeUInt8(g.heads, 58);
  f.writeUInt8(g.sectorsPerTrack, 59);
  f.writeUInt32BE(2, 60); // disk type: fixed
  uniqueId.copy(f, 68, 0, 16);
  let sum = 0;
  for (const byte of f) sum += byte;
  f.writeUInt32BE(~sum >>> 0, 64);
  return f;
}

async function sha256OfFile(file: string): Promise<Buffer> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest();
}

/** Writes `out` = the raw disk + the VHD footer. The raw disk must be a multiple of 1 MiB. */
export async function writeFixedVhd(raw: string, out: string): Promise<void> {
  const { size } = await fs.stat(raw);
  if (size % (1024 * 1024) !== 0)
    throw new Error(`a VHD for Azure needs a size that is a multiple of 1 MiB; the raw disk has ${size} bytes`);
  const id = (await sha256OfFile(raw)).subarray(0, 16);
  await fs.copyFile(raw, out);
  await fs.appendFile(out, vhdFooter(size, id));
}

const octal = (value: number, width: number) => value.toString(8).padStart(width - 1, '0') + '\0';

/** A GNU tar header for one regular file. */
export function tarHeader(name: string, size: number, mtime: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(0o644, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(mtime, 12), 136, 'ascii');
  h.write('        ', 148, 'ascii'); // checksum field counts as spaces
  h.write('0', 156, 'ascii');
  h.write('ustar  \0', 257, 'ascii'); // GNU magic + version
  h.write('root', 265, 'ascii');
  h.write('root', 297, 'ascii');
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** Writes `out` = gzip(GNU tar holding `disk.raw` = the raw disk), as GCE imports images. */
export async function writeGceTarball(raw: string, out: string, mtime = 0): Promise<void> {
  const { size } = await fs.stat(raw);
  async function* tar(): AsyncGenerator<Buffer> {
    yield tarHeader('disk.raw', size, mtime);
    for await (const chunk of createReadStream(raw, { highWaterMark: 4 * 1024 * 1024 })) yield chunk as Buffer;
    const used = 512 + size + ((512 - (size % 512)) % 512) + 1024;
    yield Buffer.alloc((512 - (size % 512)) % 512);
    yield Buffer.alloc(1024 + ((10240 - (used % 10240)) % 10240)); // end-of-archive blocks, padded to GNU tar's 10 KiB record
  }
  await pipeline(Readable.from(tar()), createGzip({ level: 6 }), createWriteStream(out));
}
