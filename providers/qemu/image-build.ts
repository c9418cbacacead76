/**
 * The qemu image `mini up --vm` boots when the config names none: built with `image build`'s code
 * (lib/node-image/build/) into the user's qemu image store (<user config>/qemu-images/<version>/, ./image.ts) and
 * signed with the user's image key, under the version `vm-<12 hex digits>` of the digest of its inputs: the pinned
 * Debian packages (names and versions), the pinned Node.js binary, the bundled node program and the image build
 * code itself. A later run with the same inputs boots the stored image without building; a new build of the
 * project (another node program) gets a new version. Building takes minutes (docs/workflows/node-images.md).
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { qemuImagesDir } from './image.js';

async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) out.push(path.join(entry.parentPath, entry.name));
  return out.sort();
}

/** The store version of the image these inputs build. */
export async function storeImageVersion(inputs: {
  packages: readonly unknown[];
  nodeBinary: string;
  nodeProgramDir: string;
  buildCodeDir: string;
}): Promise<string> {
  const hash = createHash('sha256').update(JSON.stringify(inputs.packages)).update('\0');
  for (const file of [
    inputs.nodeBinary,
    ...(await filesBelow(inputs.nodeProgramDir)),
    ...(await filesBelow(inputs.buildCodeDir)),
  ]) {
    hash
      .update(path.basename(file))
      .update('\0')
      .update(await fs.readFile(file));
  }
  return `vm-${hash.digest('hex').slice(0, 12)}`;
}

export interface EnsureImageOptions {
  userConfigDir?: string;
  /** A line per build step (the build takes minutes). */
  progress?: (message: string) => void;
}

/** The version of the stored image of this installation's inputs, built first when the store lacks it. */
export async function ensureStoreImage(options: EnsureImageOptions = {}): Promise<{ version: string; built: boolean }> {
  const [
    { buildNodeImage, BUILD_STEPS },
    { defaultBuildDeps, defaultNodeProgramDir, pinnedNodeBinary },
    { ALL_PACKAGES, defaultPackageCache },
    { userConfigDir },
  ] = await Promise.all([
    import('../../lib/node-image/build/index.js'),
    import('../../lib/node-image/build/defaults.js'),
    import('../../lib/node-image/build/packages.js'),
    import('../../lib/user-config-dir.js'),
  ]);
  const configDir = options.userConfigDir ?? userConfigDir();
  const node = await pinnedNodeBinary();
  const nodeProgramDir = defaultNodeProgramDir();
  const version = await storeImageVersion({
    packages: ALL_PACKAGES,
    nodeBinary: node.binary,
    nodeProgramDir,
    buildCodeDir: fileURLToPath(new URL('../../lib/node-image/', import.meta.url)),
  });
  const store = qemuImagesDir(configDir);
  const dir = path.join(store, version);
  if (await fs.stat(path.join(dir, 'manifest.json')).catch(() => undefined)) return { version, built: false };
  await fs.mkdir(store, { recursive: true, mode: 0o700 });
  const temp = await fs.mkdtemp(path.join(store, `.build-${version}-`));
  const titles = new Map(BUILD_STEPS.map((s) => [s.id, s.title]));
  try {
    await buildNodeImage(
      { provider: 'qemu', outDir: temp, version, packageCache: defaultPackageCache(), nodeProgramDir, node },
      defaultBuildDeps(
        (step, message) =>
          options.progress?.(`building the qemu image ${version}: ${message ?? titles.get(step) ?? step}`),
        configDir,
      ),
    );
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rename(temp, dir);
  } catch (err) {
    await fs.rm(temp, { recursive: true, force: true });
    throw err;
  }
  return { version, built: true };
}
