/**
 * The local provider's versioned images (`mini image create`, `mini image list`), kept in the user's config folder
 * (lib/user-config-dir.ts), so that every workspace of the user can run them:
 *
 *   <user config>/images/<version>/
 *     node-program/                         the image: a copy of the build's dist/node-program/ (the bundled node
 *                                           program and every file it loads; ./node-program.ts)
 *     measurements.json, .sig               its measurements (lib/images/signed-measurements.ts), signed
 *     image.json                            {version, created, source}: when and from which folder it was made
 *   <user config>/image-signing-key.pem     the user's image key (PKCS#8, 0600), made on first use; .pub beside it
 *
 * create: check the source folder → copy its dist/node-program/ into a temporary folder beside the images (file
 * contents copied, never linked: the source's owner must not be able to change the image; a source holding a
 * symbolic link or a special file is refused) → measure the copy exactly as the launcher will measure it when a node
 * boots (./image-pcrs.ts) → write and sign the measurements → make every file read-only (0444, folders
 * 0555; owned by whoever runs create, the image store's owner) → rename the folder to its version, so an image
 * exists whole or not at all. An image is never changed afterwards: a new build is a new version. Nothing here
 * checks that an image's files still match its measurements: a node booted from a changed image shows other PCRs,
 * and attestation refuses it, as it would a tampered cloud image. Removing an image (or a temporary folder) makes
 * its folders writable first (removeImageTree).
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { imageMeasurementsDigest } from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { defaultMeasurements } from '../../lib/config/measurements.js';
import { UserError } from '../../lib/errors.js';
import type { TrustedKey } from '../../lib/signing-keys.js';
import { isImageVersion, LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import {
  signMeasurementsFile,
  verifyMeasurementsFile,
  type SignedMeasurements,
} from '../../lib/images/signed-measurements.js';
import {
  loadOrCreateSigningKey,
  readPublicKeyFile,
  signingKeyFiles,
  type SigningKeyFiles,
} from '../../lib/images/signing-key-file.js';
import { userConfigDir } from '../../lib/user-config-dir.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { expectedImageMeasurements, type NodeImage } from './image-pcrs.js';
import { buildFolder, defaultNodeProgram, NODE_PROGRAM_DIR, NODE_PROGRAM_ENTRY } from './node-program.js';

/** The entry of images made before the node program's files became CommonJS with code caches. */
const LEGACY_NODE_PROGRAM_ENTRY = 'main.mjs';

export const LOCAL_IMAGE_VARIANT = 'local-vtpm';
const MEASUREMENTS_FILE = 'measurements.json';
const SIGNATURE_FILE = 'measurements.json.sig';
const INFO_FILE = 'image.json';
const KEY_NAME = 'image-signing-key';
const TEMP_PREFIX = '.creating-';
/** The image's node-program folder inside an image version. */
const PROGRAM_DIR = 'node-program';

export interface LocalImageStoreOptions {
  /** The user's config folder; default $XDG_CONFIG_HOME/constellation or ~/.config/constellation. */
  userConfigDir?: string;
  /** The Node.js binary nodes run on (measured into PCR 4); default the one running this process. */
  nodeBinary?: string;
  now?: () => Date;
}

export interface LocalImage {
  version: string;
  /** ISO time the image was made. */
  created: string;
  /** The folder it was made from. */
  source: string;
  dir: string;
}

export interface ListedImage extends LocalImage {
  /** imageMeasurementsDigest of its measurements; empty unless the signature verified. */
  measurementsDigest: string;
  /** verified: signed by the user's image key; bad: the signature does not verify (edited, or another key). */
  signature: 'verified' | 'bad' | 'no key';
}

export interface CreatedImage extends LocalImage {
  measurements: Measurements;
  measurementsDigest: string;
  /** True when this create made the user's image key. */
  keyCreated: boolean;
  keyFile: string;
}

export class LocalImageStore {
  readonly root: string;
  /** The user's cache of image file digests (./digest-cache.ts): the user's alone, like the images. */
  readonly digestCacheFile: string;
  readonly imagesDir: string;
  readonly keyFiles: SigningKeyFiles;
  private readonly nodeBinary: string;
  private readonly now: () => Date;

  constructor(options: LocalImageStoreOptions = {}) {
    this.root = path.resolve(options.userConfigDir ?? userConfigDir());
    this.imagesDir = path.join(this.root, 'images');
    this.keyFiles = signingKeyFiles(this.root, KEY_NAME);
    this.digestCacheFile = path.join(this.root, 'image-digests.json');
    this.nodeBinary = path.resolve(options.nodeBinary ?? process.execPath);
    this.now = options.now ?? (() => new Date());
  }

  /** The folder of an image version (whether it exists or not). */
  imageDir(version: string): string {
    requireVersion(version);
    return path.join(this.imagesDir, version);
  }

  /**
   * What the launcher boots for a node of this image. An image made before the node program became CommonJS has
   * no main.cjs; its nodes start, as they always did, from its main.mjs (which its measurements were made with).
   */
  nodeImage(version: string): NodeImage {
    const program = path.join(this.imageDir(version), PROGRAM_DIR);
    const legacyEntry = path.join(program, LEGACY_NODE_PROGRAM_ENTRY);
    const entry = path.join(program, NODE_PROGRAM_ENTRY);
    return {
      nodeBinary: this.nodeBinary,
      imageDir: program,
      entry: !existsSync(entry) && existsSync(legacyEntry) ? legacyEntry : entry,
    };
  }

  /** The user's image key (its public half), or undefined before the first image was made. */
  publicKey(): Promise<TrustedKey | undefined> {
    return readPublicKeyFile(this.keyFiles, `your local image key (${this.keyFiles.publicKeyFile})`);
  }

  /** Makes image `version` from `from` (default: the build this CLI runs from); see the module header. */
  async create(version: string, from?: string): Promise<CreatedImage> {
    requireVersion(version);
    const source = path.resolve(from ?? buildFolder());
    const sourceProgram = defaultNodeProgram(source).imageDir;
    await checkSource(source, sourceProgram);
    const dir = this.imageDir(version);
    await this.refuseExisting(version);
    await fs.mkdir(this.imagesDir, { recursive: true, mode: 0o700 });
    await this.removeAbandonedTemps();
    const { privateKey, created: keyCreated } = await loadOrCreateSigningKey(this.keyFiles);

    const temp = path.join(this.imagesDir, `${TEMP_PREFIX}${version}-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await fs.mkdir(temp, { mode: 0o700 });
      const program = path.join(temp, PROGRAM_DIR);
      await copyTree(sourceProgram, program);
      const measured = await expectedImageMeasurements({
        nodeBinary: this.nodeBinary,
        imageDir: program,
        entry: path.join(program, NODE_PROGRAM_ENTRY),
      });
      // The variant's warn-only entries (PCR 15) stay, so the config after an upgrade has the shape `create` gives it.
      const measurements = { ...defaultMeasurements(LOCAL_IMAGE_VARIANT), ...measured };
      const signed = signMeasurementsFile({ version, variant: LOCAL_IMAGE_VARIANT, measurements }, privateKey);
      await writeFileAtomic(path.join(temp, MEASUREMENTS_FILE), signed.file, { mode: 0o644 });
      await writeFileAtomic(path.join(temp, SIGNATURE_FILE), signed.signature, { mode: 0o644 });
      const info: LocalImage = { version, created: this.now().toISOString(), source, dir };
      await writeFileAtomic(
        path.join(temp, INFO_FILE),
        `${JSON.stringify({ version, created: info.created, source }, null, 2)}\n`,
        { mode: 0o644 },
      );
      await makeReadOnly(temp);
      await fs.rename(temp, dir).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST') await this.refuseExisting(version);
        throw err;
      });
      const sorted = JSON.parse(signed.file.toString('utf8')) as SignedMeasurements;
      return {
        ...info,
        measurements: sorted.measurements,
        measurementsDigest: imageMeasurementsDigest(sorted.measurements),
        keyCreated,
        keyFile: this.keyFiles.privateKeyFile,
      };
    } finally {
      await removeImageTree(temp);
    }
  }

  /**
   * Removes image `version` (its folder is read-only: made writable first). Workspaces whose config names it can no
   * longer boot nodes of it; their running nodes keep running.
   */
  async delete(version: string): Promise<void> {
    if (!(await this.has(version))) this.missing(version, Object.assign(new Error(version), { code: 'ENOENT' }));
    await removeImageTree(this.imageDir(version));
  }

  /** Every image, oldest first by creation; each with its signature checked against the user's image key. */
  async list(): Promise<ListedImage[]> {
    const names = await fs.readdir(this.imagesDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    const key = await this.publicKey();
    const images: ListedImage[] = [];
    for (const name of names) {
      if (!isImageVersion(name)) continue; // temporary folders of a create in progress, stray files
      const info = await this.info(name).catch(() => undefined);
      if (!info) continue;
      let measurementsDigest = '';
      let signature: ListedImage['signature'] = 'no key';
      if (key) {
        try {
          measurementsDigest = imageMeasurementsDigest((await this.measurements(name, key)).measurements);
          signature = 'verified';
        } catch {
          signature = 'bad';
        }
      }
      images.push({ ...info, measurementsDigest, signature });
    }
    return images.sort((a, b) => a.created.localeCompare(b.created) || a.version.localeCompare(b.version));
  }

  /** Whether image `version` exists. */
  async has(version: string): Promise<boolean> {
    return (await this.info(version).catch(() => undefined)) !== undefined;
  }

  /**
   * The image's signed measurements, verified with `key` (the user's image key, or the config's
   * measurementsSigningKey) before anything in them is read. Throws a UserError naming the image.
   */
  async measurements(version: string, key: TrustedKey): Promise<SignedMeasurements> {
    const dir = this.imageDir(version);
    const file = path.join(dir, MEASUREMENTS_FILE);
    const [bytes, signature] = await Promise.all([
      fs.readFile(file).catch((err: unknown) => this.missing(version, err)),
      fs.readFile(path.join(dir, SIGNATURE_FILE)).catch((err: unknown) => this.missing(version, err)),
    ]);
    return verifyMeasurementsFile({
      file: bytes,
      signature,
      key,
      source: `of local image ${version} (${file})`,
      expect: { version, variant: LOCAL_IMAGE_VARIANT },
    });
  }

  private async info(version: string): Promise<LocalImage> {
    const dir = this.imageDir(version);
    const raw = JSON.parse(await fs.readFile(path.join(dir, INFO_FILE), 'utf8')) as Partial<LocalImage>;
    return { version, created: String(raw.created ?? ''), source: String(raw.source ?? ''), dir };
  }

  private async refuseExisting(version: string): Promise<void> {
    const dir = this.imageDir(version);
    if (
      await fs.stat(dir).then(
        () => true,
        () => false,
      )
    ) {
      throw new UserError(`The local image ${version} exists already (${dir}).`, {
        hint: 'An image never changes: give the new build another version, or delete the folder first if you really mean to replace it.',
      });
    }
  }

  private missing(version: string, err: unknown): never {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new UserError(`There is no local image ${version} (in ${this.imagesDir}).`, {
        hint: `\`constellation mini image list\` shows the images; \`constellation mini image create ${version}\` makes one from the current build.`,
        cause: err,
      });
    }
    throw err;
  }

  /** Temporary folders of creates whose process is gone (killed part-way). */
  private async removeAbandonedTemps(): Promise<void> {
    for (const name of await fs.readdir(this.imagesDir)) {
      if (!name.startsWith(TEMP_PREFIX)) continue;
      const pid = Number(/-(\d+)-[0-9a-f]+$/.exec(name)?.[1]);
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) continue;
      await removeImageTree(path.join(this.imagesDir, name));
    }
  }
}

function requireVersion(version: string): void {
  if (!isImageVersion(version)) {
    throw new UserError(
      version === LOCAL_BUILD_IMAGE
        ? `"${LOCAL_BUILD_IMAGE}" names the current build, not an image version.`
        : `"${version}" is not an image version: use 1 to 64 letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. v1.2.0).`,
    );
  }
}

async function checkSource(source: string, program: string): Promise<void> {
  const entry = path.join(program, NODE_PROGRAM_ENTRY);
  if (
    !(await fs.stat(entry).then(
      (st) => st.isFile(),
      () => false,
    ))
  ) {
    throw new UserError(
      `${source} is not a build to make an image of: ${path.join(NODE_PROGRAM_DIR, NODE_PROGRAM_ENTRY)} is missing.`,
      {
        hint: 'Give a folder laid out as the repository after `npm ci && npm run build` (its dist/node-program/ is the image).',
      },
    );
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Copies a tree by content (never a link: the copy must not change when the source does). Only regular files and
 * folders are copied; a symbolic link or a special file in the source is refused, as the launcher would refuse it.
 */
async function copyTree(from: string, to: string): Promise<void> {
  await fs.mkdir(to, { mode: 0o700 });
  for (const entry of await fs.readdir(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    if (entry.isDirectory()) await copyTree(src, dst);
    else if (entry.isFile()) await fs.copyFile(src, dst, fsConstants.COPYFILE_EXCL);
    else {
      throw new UserError(
        `${src} is ${entry.isSymbolicLink() ? 'a symbolic link' : 'a special file'}: a node image holds only regular files and folders.`,
        {
          hint: 'Rebuild (npm run build): the bundled node program has no links.',
        },
      );
    }
  }
}

/** Files 0444, folders 0555, deepest first (a folder is made read-only after what is inside it). */
async function makeReadOnly(dir: string): Promise<void> {
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) await makeReadOnly(p);
    else if (entry.isFile()) await fs.chmod(p, 0o444);
  }
  await fs.chmod(dir, 0o555);
}

/**
 * Removes an image folder (or a temporary one) whose folders are read-only: a folder's entries can only be removed
 * once it is writable again. Missing folders are fine.
 */
export async function removeImageTree(dir: string): Promise<void> {
  const writable = async (d: string): Promise<void> => {
    const st = await fs.lstat(d).catch(() => undefined);
    if (!st?.isDirectory()) return;
    await fs.chmod(d, 0o700).catch(() => undefined);
    for (const entry of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (entry.isDirectory()) await writable(path.join(d, entry.name));
    }
  };
  await writable(dir);
  await fs.rm(dir, { recursive: true, force: true, maxRetries: 3 });
}
