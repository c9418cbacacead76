/**
 * What the node launcher measures into the TPM ("firmware" of a local node), and the PCR values that results in.
 * The launcher and `create` (expected measurements for the config) both call this module, so they cannot disagree.
 * These are PCR values computed from an image's files; an image's signed measurements file is read and checked by
 * cli/images/image-measurements.ts.
 *
 * A local node image is the Node.js binary plus the node program's folder (dist/node-program/ of a build, made by
 * scripts/bundle-node-program.mjs: the bundle, its chunks and the native and data files it loads). The node program
 * loads nothing from outside that folder but the Node.js binary, so measuring both by content measures every byte
 * it can execute (docs/workflows/local-provider.md).
 *
 * Event digests, computed once per PCR bank algorithm (SHA-256, SHA-384):
 *   PCR 4  ← H(the Node.js binary that runs the node program)
 *   PCR 9  ← H(image directory), a deterministic digest over its sorted file list and contents:
 *            H( for each regular file in sorted relative POSIX path order: path ‖ 0x00 ‖ 'f' ‖ H(content) )
 *            directories only contribute their files; an image holding anything else (a symbolic link, which could
 *            point out of the image, a socket, a device) is refused, so nothing loadable escapes the digest
 *   PCR 11 ← H(manifest), the manifest being the JSON {"entry": <entry relative to the image>, "image": hex(PCR 9
 *            digest), "node": hex(PCR 4 digest)} (keys in this order): which program of which image on which runtime
 * Each PCR is extended once after a TPM reset, so its value is H(0^n ‖ event digest). PCRs 8, 12 and 13 stay zero.
 * Written here because no library computes a directory digest with a fixed, documented layout.
 */
import { createHash, type Hash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Measurements } from '../../lib/attestation/types.js';
import { UserError } from '../../lib/errors.js';
import { FileDigestCache } from './digest-cache.js';

export type BankAlgorithm = 'sha256' | 'sha384';
export const BANK_ALGORITHMS: readonly BankAlgorithm[] = ['sha256', 'sha384'];
/** TPM_ALG_ID of each bank (TPM 2.0 Part 2, table 9). */
export const TPM_ALG_ID: Record<BankAlgorithm, number> = { sha256: 0x0b, sha384: 0x0c };
const DIGEST_SIZE: Record<BankAlgorithm, number> = { sha256: 32, sha384: 48 };

/** The node image: the Node.js binary, the directory of the built node program, and its entry file inside it. */
export interface NodeImage {
  nodeBinary: string;
  imageDir: string;
  entry: string;
}

export const MEASURED_PCRS = [4, 9, 11] as const;
export type MeasuredPcr = (typeof MEASURED_PCRS)[number];
/** PCRs a local node image leaves at zero; expected measurements enforce that too. */
export const ZERO_PCRS = [8, 12, 13] as const;

/** Event digests per bank: what the launcher extends into PCR 4, 9 and 11. */
export type ImageEventDigests = Record<BankAlgorithm, Record<MeasuredPcr, Buffer>>;

function hashes(): Record<BankAlgorithm, Hash> {
  return { sha256: createHash('sha256'), sha384: createHash('sha384') };
}

function digestAll(h: Record<BankAlgorithm, Hash>): Record<BankAlgorithm, Buffer> {
  return { sha256: h.sha256.digest(), sha384: h.sha384.digest() };
}

/** Thrown for an image directory that holds something other than regular files and directories. */
function notAnImageFile(dir: string, rel: string, what: string): UserError {
  return new UserError(`The node image ${dir} holds ${what} (${rel}); an image holds only regular files and folders.`, {
    hint: 'A link could lead out of the measured image. Rebuild it (npm run build) or make the image again from a clean build.',
  });
}

async function listImage(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listImage(dir, rel)));
    else if (entry.isFile()) out.push(rel);
    else throw notAnImageFile(dir, rel, entry.isSymbolicLink() ? 'a symbolic link' : 'a special file');
  }
  return out;
}

/** The PCR 9 event digest of an image directory, per bank (see the module header). */
export async function imageDirectoryDigests(
  dir: string,
  cache: FileDigestCache = new FileDigestCache(),
): Promise<Record<BankAlgorithm, Buffer>> {
  const root = await fs.lstat(dir);
  if (root.isSymbolicLink()) throw notAnImageFile(dir, '.', 'a symbolic link');
  const files = (await listImage(dir)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const perFile = await Promise.all(files.map((rel) => cache.digests(path.join(dir, ...rel.split('/')))));
  const h = hashes();
  files.forEach((rel, i) => {
    for (const alg of BANK_ALGORITHMS) {
      h[alg]
        .update(Buffer.from(rel, 'utf8'))
        .update(Buffer.from([0, 'f'.charCodeAt(0)]))
        .update(perFile[i][alg]);
    }
  });
  return digestAll(h);
}

/** The entry's path relative to the image directory; the entry must be inside the measured image. */
export function entryInImage(image: NodeImage): string {
  const rel = path.relative(path.resolve(image.imageDir), path.resolve(image.entry));
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new UserError(`The node program ${image.entry} is not inside its image directory ${image.imageDir}.`, {
      hint: 'The launcher measures the image directory; the program it starts must be part of it.',
    });
  }
  return rel.split(path.sep).join('/');
}

/**
 * Everything the launcher extends, computed from the files as they are now (`cache` skips the hashing of files that
 * did not change since it hashed them; see ./digest-cache.ts).
 */
export async function imageEventDigests(
  image: NodeImage,
  cache: FileDigestCache = new FileDigestCache(),
): Promise<ImageEventDigests> {
  const entry = entryInImage(image);
  await fs.access(image.entry).catch((err: unknown) => {
    throw new UserError(`The node program ${image.entry} does not exist.`, {
      hint: 'Build the project first (npm run build), or point the local provider at another node program.',
      cause: err,
    });
  });
  const [runtime, dir] = await Promise.all([
    cache.digests(image.nodeBinary),
    imageDirectoryDigests(image.imageDir, cache),
  ]);
  await cache.save();
  const result = {} as ImageEventDigests;
  for (const alg of BANK_ALGORITHMS) {
    const manifest = JSON.stringify({ entry, image: dir[alg].toString('hex'), node: runtime[alg].toString('hex') });
    result[alg] = { 4: runtime[alg], 9: dir[alg], 11: createHash(alg).update(manifest).digest() };
  }
  return result;
}

/** PCR value after a reset and the given extends, in order. */
export function extendFromZero(alg: BankAlgorithm, digests: Uint8Array[]): Buffer {
  let pcr = Buffer.alloc(DIGEST_SIZE[alg]);
  for (const d of digests) pcr = createHash(alg).update(pcr).update(d).digest();
  return pcr;
}

/** The PCR values a freshly booted node of this image has, per bank (4, 9, 11 measured; 8, 12, 13 zero). */
export function expectedPcrValues(digests: ImageEventDigests): Record<BankAlgorithm, Map<number, Buffer>> {
  const out = {} as Record<BankAlgorithm, Map<number, Buffer>>;
  for (const alg of BANK_ALGORITHMS) {
    const values = new Map<number, Buffer>();
    for (const pcr of MEASURED_PCRS) values.set(pcr, extendFromZero(alg, [digests[alg][pcr]]));
    for (const pcr of ZERO_PCRS) values.set(pcr, Buffer.alloc(DIGEST_SIZE[alg]));
    out[alg] = values;
  }
  return out;
}

/** The config's measurements (SHA-256 bank, all enforced) for nodes running this image. */
export async function expectedImageMeasurements(image: NodeImage, cache?: FileDigestCache): Promise<Measurements> {
  const values = expectedPcrValues(await imageEventDigests(image, cache)).sha256;
  const measurements: Measurements = {};
  for (const [index, value] of [...values].sort((a, b) => a[0] - b[0])) {
    measurements[String(index)] = { expected: value.toString('hex'), warnOnly: false };
  }
  return measurements;
}
