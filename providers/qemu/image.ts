/**
 * Which node image a qemu node boots and what it must measure. The config's `image` names either the folder that
 * `constellation image build --provider qemu --out <dir>` wrote, or a version in the user's qemu image store
 * (<user config>/qemu-images/<version>/, where `mini up --vm` builds one). Either way the folder holds one raw disk
 * (constellation-qemu-<version>.raw) and, beside it, measurements.json and measurements.json.sig: the measurements
 * of a qemu node come only from that signed file, verified with the user's image key or the config's
 * measurementsSigningKey (never measured on the fly), and an image without them is refused
 * (docs/workflows/mini.md#vm-nodes-mini-up---vm).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { isImageVersion } from '../../lib/config/image-version.js';
import { UserError } from '../../lib/errors.js';
import { verifyMeasurementsFile, type SignedMeasurements } from '../../lib/images/signed-measurements.js';
import type { TrustedKey } from '../../lib/signing-keys.js';
import { userConfigDir as defaultUserConfigDir } from '../../lib/user-config-dir.js';

export const MEASUREMENTS_FILE = 'measurements.json';
export const SIGNATURE_FILE = 'measurements.json.sig';

export interface QemuImage {
  /** The config's `image` as given. */
  name: string;
  dir: string;
  rawDisk: string;
  measurementsFile: string;
  signatureFile: string;
}

/** The user's qemu image store. */
export function qemuImagesDir(userConfigDir = defaultUserConfigDir()): string {
  return path.join(userConfigDir, 'qemu-images');
}

/** Whether the config's `image` names a folder (a path) rather than a version of the store. */
export function isImagePath(image: string): boolean {
  return image.includes('/') || image.startsWith('.');
}

/** The image's folder and files; a UserError when the folder, its one raw disk or its signed measurements are missing. */
export async function resolveQemuImage(
  image: string,
  options: { userConfigDir?: string; baseDir?: string } = {},
): Promise<QemuImage> {
  let dir: string;
  if (isImagePath(image)) dir = path.resolve(options.baseDir ?? process.cwd(), image);
  else if (isImageVersion(image)) dir = path.join(qemuImagesDir(options.userConfigDir), image);
  else {
    throw new UserError(`"${image}" is neither the folder of a qemu node image nor an image version.`, {
      hint: 'Set `image` to the folder `constellation image build --provider qemu --out <dir>` wrote, or to a version in your qemu image store.',
    });
  }
  const entries = await fs.readdir(dir).catch(() => undefined);
  if (!entries) {
    throw new UserError(`There is no qemu node image at ${dir}.`, {
      hint: isImagePath(image)
        ? '`constellation image build --provider qemu --out <dir>` builds one.'
        : '`constellation mini up --vm` builds the image of this version into your image store; `image build --provider qemu` builds one anywhere.',
    });
  }
  const raws = entries.filter((e) => /^constellation-qemu-.*\.raw$/.test(e));
  if (raws.length !== 1) {
    throw new UserError(
      `The folder ${dir} holds ${raws.length === 0 ? 'no' : 'more than one'} qemu node image (constellation-qemu-<version>.raw).`,
      {
        hint: 'Point `image` at the folder of one `image build --provider qemu` output.',
      },
    );
  }
  for (const file of [MEASUREMENTS_FILE, SIGNATURE_FILE]) {
    if (!entries.includes(file)) {
      throw new UserError(
        `The qemu node image in ${dir} has no ${file}: an image without signed measurements is refused.`,
        {
          hint: 'Build it with `constellation image build --provider qemu`, which signs its measurements with your image key; they are never measured on the fly.',
        },
      );
    }
  }
  return {
    name: image,
    dir,
    rawDisk: path.join(dir, raws[0]!),
    measurementsFile: path.join(dir, MEASUREMENTS_FILE),
    signatureFile: path.join(dir, SIGNATURE_FILE),
  };
}

/** The version of the image in `dir` (the X of its constellation-qemu-X.raw), or undefined when the folder holds none or several. */
export async function qemuImageVersionIn(dir: string): Promise<string | undefined> {
  const raws = (await fs.readdir(dir).catch(() => [] as string[]))
    .map((e) => /^constellation-qemu-(.+)\.raw$/.exec(e)?.[1])
    .filter((v) => v !== undefined);
  return raws.length === 1 ? raws[0] : undefined;
}

/**
 * The image version a node booted from the config's `image` reports (its os-release IMAGE_VERSION): the store's
 * version as given, or for a folder the version of the image in it (undefined when the folder holds no one image).
 */
export async function qemuImageVersion(image: string, baseDir = process.cwd()): Promise<string | undefined> {
  if (!isImagePath(image)) return image;
  return qemuImageVersionIn(path.resolve(baseDir, image));
}

/** The image's signed measurements, verified with `key` for variant qemu-vtpm (a UserError otherwise). */
export async function loadQemuImageMeasurements(image: QemuImage, key: TrustedKey): Promise<SignedMeasurements> {
  const [file, signature] = await Promise.all([fs.readFile(image.measurementsFile), fs.readFile(image.signatureFile)]);
  return verifyMeasurementsFile({
    file,
    signature,
    key,
    source: image.measurementsFile,
    expect: { variant: 'qemu-vtpm' },
  });
}
