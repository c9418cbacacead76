/**
 * Where an image's signed measurements come from and which key they must verify with: the one place the CLI decides
 * both, for `create` (versioned local images), `config fetch-measurements`, `upgrade check` and `upgrade apply`.
 *
 *   key     the config's measurementsSigningKey, else (local and qemu providers) the user's image key, else the release key
 *           pinned into this CLI (lib/images/release-key.ts)
 *   source  local provider: the user's images (`mini image create`, providers/local/image-store.ts)
 *           qemu provider: measurements.json beside the image (its folder, or a version of the user's qemu image store);
 *           `upgrade check` offers every version of that store and the config's own folder
 *           clouds: a version index (lib/images/version-index.ts), or the URLs of a file and its signature
 *
 * Every path verifies the signature over the file's exact bytes before anything in it is used
 * (lib/images/signed-measurements.ts); a refusal is a UserError that names the file and the key.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { measurementChanges } from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { attestationVariantOf, measurementsOf, providerOf, type Config } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import { trustedKeyFromPem, type TrustedKey } from '../../lib/signing-keys.js';
import { compareImageVersions, LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { displayUrl, readUrl, toUrl, type ReadUrlOptions } from '../../lib/images/read-url.js';
import { releaseKey } from '../../lib/images/release-key.js';
import { verifyMeasurementsFile, type SignedMeasurements } from '../../lib/images/signed-measurements.js';
import { parseVersionIndex, type IndexedImage } from '../../lib/images/version-index.js';
import { LocalImageStore } from '../../providers/local/image-store.js';

export interface ImageSourceOptions {
  /** The user's config folder (local images and the image key); default $XDG_CONFIG_HOME/constellation. */
  userConfigDir?: string;
  /** Clouds: the version index, as an https or file URL or a path. */
  index?: string;
  /** How URLs are read (tests: the CA of a local HTTPS server). */
  read?: ReadUrlOptions;
  /** qemu: the folder a relative image folder is relative to (the workspace); default the working directory. */
  baseDir?: string;
}

/** Signed measurements, verified, with what the config's `image` is for them and where they were read. */
export interface VerifiedImageMeasurements extends SignedMeasurements {
  /** The config's `image` for this version: the version itself, or the cloud image reference of the index. */
  image: string;
  /** The measurements file's path or URL. */
  source: string;
  key: TrustedKey;
}

/** One image that `upgrade check` offers: verified measurements, or why they were refused. */
export interface AvailableImage {
  version: string;
  image: string;
  source: string;
  measurements?: Measurements;
  /** The refusal (a bad signature, an unreadable file), when there are no verified measurements. */
  refused?: string;
}

/** The key an image's measurements must verify with, for this config (see the module header). */
export async function trustedMeasurementsKey(config: Config, options: ImageSourceOptions = {}): Promise<TrustedKey> {
  if (config.measurementsSigningKey)
    return trustedKeyFromPem(config.measurementsSigningKey, "the config's measurementsSigningKey");
  if (providerOf(config) !== 'local' && providerOf(config) !== 'qemu') return releaseKey();
  const store = new LocalImageStore({ userConfigDir: options.userConfigDir });
  const key = await store.publicKey();
  if (!key) {
    throw new UserError(
      `There is no local image key yet (${store.keyFiles.publicKeyFile}): no local image was made by this user.`,
      {
        hint: '`constellation mini image create <version>` makes an image of the current build, and the key with the first one.',
      },
    );
  }
  return key;
}

/**
 * "Verify and load the signed measurements of image X": the measurements of `version` (a version, or for clouds also
 * the cloud image reference the index gives for it), verified for the config's attestation variant with the
 * config's key. Throws a UserError when they cannot be found, read or verified.
 */
export async function loadImageMeasurements(
  config: Config,
  version: string,
  options: ImageSourceOptions = {},
): Promise<VerifiedImageMeasurements> {
  const variant = attestationVariantOf(config);
  const key = await trustedMeasurementsKey(config, options);
  if (providerOf(config) === 'local') {
    if (version === LOCAL_BUILD_IMAGE) {
      throw new UserError(
        `Image "${LOCAL_BUILD_IMAGE}" is the current build: it has no signed measurements (create measures it).`,
        {
          hint: '`constellation mini image create <version>` makes a versioned image with signed measurements; set `image` to that version.',
        },
      );
    }
    const store = new LocalImageStore({ userConfigDir: options.userConfigDir });
    const signed = await store.measurements(version, key);
    return { ...signed, image: version, source: store.imageDir(version), key };
  }
  if (providerOf(config) === 'qemu') {
    const { resolveQemuImage, loadQemuImageMeasurements } = await import('../../providers/qemu/image.js');
    const image = await resolveQemuImage(version, { userConfigDir: options.userConfigDir, baseDir: options.baseDir });
    const signed = await loadQemuImageMeasurements(image, key);
    return { ...signed, image: version, source: image.measurementsFile, key };
  }
  const entries = await readIndex(options);
  const entry = pickEntry(
    entries.filter((e) => e.version === version || e.image === version),
    variant,
  );
  if (!entry) {
    throw new UserError(`The version index ${displayUrl(indexUrl(options))} has no image ${version} for ${variant}.`, {
      hint: '`constellation upgrade check --index <url>` lists the images it has.',
    });
  }
  const signed = await fetchSigned(
    entry.measurementsUrl,
    entry.signatureUrl,
    key,
    { version: entry.version, variant },
    options,
  );
  return { ...signed, image: entry.image };
}

/**
 * `upgrade apply`'s first check (docs/design.md#upgrades): the config's measurements are exactly the signed measurements of its
 * image (every PCR, its value and whether it only warns), verified with the config's key. The local provider's
 * current build (`local`) has none: its nodes are measured by the CLI itself (undefined).
 */
export async function verifyConfiguredMeasurements(
  config: Config,
  options: ImageSourceOptions = {},
): Promise<VerifiedImageMeasurements | undefined> {
  if (providerOf(config) === 'local' && config.image === LOCAL_BUILD_IMAGE) return undefined;
  const signed = await loadImageMeasurements(config, config.image, options);
  const configured = measurementsOf(config);
  const differences = measurementChanges(configured, signed.measurements).map(({ index, from, to, warnOnly }) => {
    if (from === undefined) return `PCR ${index} is missing`;
    if (to === undefined) return `PCR ${index} is not in the signed file`;
    if (from !== to) return `PCR ${index} is ${from}, signed ${to}`;
    return `PCR ${index} has warnOnly ${configured[String(index)].warnOnly}, signed ${warnOnly}`;
  });
  if (differences.length > 0) {
    throw new UserError(
      `The config's measurements are not the signed measurements of image ${config.image} (${signed.source}): ${differences.join('; ')}.`,
      {
        hint: "`constellation config fetch-measurements` writes the signed measurements of the config's image into the config (`constellation upgrade check --update-config` does it with the image). Nothing was changed.",
      },
    );
  }
  return signed;
}

/** The signed measurements at the given URLs (or paths), verified for the config's variant with the config's key. */
export async function loadMeasurementsFromUrls(
  config: Config,
  measurementsUrl: string,
  signatureUrl: string,
  options: ImageSourceOptions = {},
): Promise<VerifiedImageMeasurements> {
  const key = await trustedMeasurementsKey(config, options);
  const cwd = options.read?.cwd;
  const signed = await fetchSigned(
    toUrl(measurementsUrl, cwd),
    toUrl(signatureUrl, cwd),
    key,
    { variant: attestationVariantOf(config) },
    options,
  );
  return { ...signed, image: signed.version };
}

/**
 * Every image the config could move to, each verified (or with its refusal), oldest first: the user's local images
 * for the local provider, the index's images of the config's variant for clouds.
 */
export async function availableImages(
  config: Config,
  options: ImageSourceOptions = {},
): Promise<{ images: AvailableImage[]; key: TrustedKey; index?: IndexedImage[] }> {
  const key = await trustedMeasurementsKey(config, options);
  const variant = attestationVariantOf(config);
  const refusal = (err: unknown) => (err instanceof UserError ? err.message : `${(err as Error).message}`);
  let images: AvailableImage[];
  let index: IndexedImage[] | undefined;
  if (providerOf(config) === 'local') {
    const store = new LocalImageStore({ userConfigDir: options.userConfigDir });
    images = await Promise.all(
      (await store.list()).map(async ({ version, dir }) => {
        try {
          return {
            version,
            image: version,
            source: dir,
            measurements: (await store.measurements(version, key)).measurements,
          };
        } catch (err) {
          return { version, image: version, source: dir, refused: refusal(err) };
        }
      }),
    );
  } else if (providerOf(config) === 'qemu') {
    images = await qemuImages(config, key, options);
  } else {
    index = await readIndex(options);
    const versions = [...new Set(index.map((e) => e.version))];
    const entries = versions
      .map((v) =>
        pickEntry(
          index!.filter((e) => e.version === v),
          variant,
        ),
      )
      .filter((e): e is IndexedImage => e !== undefined);
    images = await Promise.all(
      entries.map(async (entry) => {
        const source = displayUrl(entry.measurementsUrl);
        try {
          const signed = await fetchSigned(
            entry.measurementsUrl,
            entry.signatureUrl,
            key,
            { version: entry.version, variant },
            options,
          );
          return { version: entry.version, image: entry.image, source, measurements: signed.measurements };
        } catch (err) {
          return { version: entry.version, image: entry.image, source, refused: refusal(err) };
        }
      }),
    );
  }
  return {
    images: images.sort((a, b) => compareImageVersions(a.version, b.version)),
    key,
    ...(index ? { index } : {}),
  };
}

/**
 * The qemu images `upgrade check` offers: every version of the user's qemu image store (`image` the version), and
 * the config's image when it is a folder (`image` the folder as the config names it, the version of the image in it).
 */
async function qemuImages(config: Config, key: TrustedKey, options: ImageSourceOptions): Promise<AvailableImage[]> {
  const { isImagePath, loadQemuImageMeasurements, qemuImagesDir, qemuImageVersionIn, resolveQemuImage } =
    await import('../../providers/qemu/image.js');
  const { isImageVersion } = await import('../../lib/config/image-version.js');
  const store = qemuImagesDir(options.userConfigDir);
  const names = (await fs.readdir(store, { withFileTypes: true }).catch(() => []))
    .filter((e) => e.isDirectory() && isImageVersion(e.name))
    .map((e) => e.name);
  const candidates = names.map((version) => ({ version, image: version }));
  if (isImagePath(config.image)) {
    const dir = path.resolve(options.baseDir ?? process.cwd(), config.image);
    candidates.push({ version: (await qemuImageVersionIn(dir)) ?? config.image, image: config.image });
  }
  return Promise.all(
    candidates.map(async ({ version, image }) => {
      const source = isImagePath(image)
        ? path.resolve(options.baseDir ?? process.cwd(), image)
        : path.join(store, image);
      try {
        const resolved = await resolveQemuImage(image, {
          userConfigDir: options.userConfigDir,
          baseDir: options.baseDir,
        });
        return {
          version,
          image,
          source: resolved.measurementsFile,
          measurements: (await loadQemuImageMeasurements(resolved, key)).measurements,
        };
      } catch (err) {
        return {
          version,
          image,
          source,
          refused: err instanceof UserError ? err.message : `${(err as Error).message}`,
        };
      }
    }),
  );
}

function indexUrl(options: ImageSourceOptions): URL {
  if (!options.index) {
    throw new UserError('Images of a cloud are listed in a version index; none was given.', {
      hint: 'Name it with --index <url or path> (a JSON file {"images": [{"version", "measurementsUrl", "signatureUrl"}]}).',
    });
  }
  return toUrl(options.index, options.read?.cwd);
}

async function readIndex(options: ImageSourceOptions): Promise<IndexedImage[]> {
  const url = indexUrl(options);
  return parseVersionIndex((await readUrl(url, options.read)).toString('utf8'), url);
}

/** The entry for the variant: one that names it, else one that names none. */
function pickEntry(entries: IndexedImage[], variant: string): IndexedImage | undefined {
  return entries.find((e) => e.variant === variant) ?? entries.find((e) => e.variant === undefined);
}

async function fetchSigned(
  measurementsUrl: URL,
  signatureUrl: URL,
  key: TrustedKey,
  expect: { version?: string; variant: SignedMeasurements['variant'] },
  options: ImageSourceOptions,
): Promise<SignedMeasurements & { source: string; key: TrustedKey }> {
  const [file, signature] = await Promise.all([
    readUrl(measurementsUrl, options.read),
    readUrl(signatureUrl, options.read),
  ]);
  const source = displayUrl(measurementsUrl);
  return { ...verifyMeasurementsFile({ file, signature, key, source, expect }), source, key };
}
