/**
 * The Debian packages a node image is built from, pinned by name and version, and the cache that holds their .deb
 * files (docs/workflows/node-images.md). A package is fetched once with `apt-get download <name>=<version>` into the
 * cache folder and named `<name>_<version>_amd64.deb` there; every build hashes the file it uses (SHA-256, recorded in
 * the image's manifest), so a changed cache changes the manifest, never silently the image. `scripts/fetch-image-inputs.sh`
 * fills the cache before the tests run, so no test reaches the network.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../errors.js';
import type { CommandRunner } from './tools.js';

export interface DebianPackage {
  name: string;
  version: string;
}

/** The kernel the image boots: Debian's cloud kernel of bookworm (6.1). Its modules live in lib/modules/<release>. */
export const KERNEL_PACKAGE: DebianPackage = { name: 'linux-image-6.1.0-56-cloud-amd64', version: '6.1.192-2' };
export const KERNEL_RELEASE = '6.1.0-56-cloud-amd64';
/** systemd-stub, the UEFI program the UKI is made of (usr/lib/systemd/boot/efi/linuxx64.efi.stub). */
export const STUB_PACKAGE: DebianPackage = { name: 'systemd-boot-efi', version: '252.39-1~deb12u2' };
export const STUB_PATH = 'usr/lib/systemd/boot/efi/linuxx64.efi.stub';

/** The userland of the initrd: busybox for /init and its applets, the programs the node program runs (sshd among them), and their libraries. */
export const USERLAND_PACKAGES: readonly DebianPackage[] = [
  { name: 'busybox-static', version: '1:1.35.0-4+deb12u1+b1' },
  { name: 'cryptsetup-bin', version: '2:2.6.1-4~deb12u2' },
  { name: 'e2fsprogs', version: '1.47.0-2+b2' },
  { name: 'etcd-server', version: '3.4.23-4+b4' },
  { name: 'libc6', version: '2.36-9+deb12u14' },
  { name: 'libgcc-s1', version: '12.2.0-14+deb12u1' },
  { name: 'libstdc++6', version: '12.2.0-14+deb12u1' },
  { name: 'libcryptsetup12', version: '2:2.6.1-4~deb12u2' },
  { name: 'libpopt0', version: '1.19+dfsg-1' },
  { name: 'libuuid1', version: '2.38.1-5+deb12u3' },
  { name: 'libblkid1', version: '2.38.1-5+deb12u3' },
  { name: 'libdevmapper1.02.1', version: '2:1.02.185-2' },
  { name: 'libssl3', version: '3.0.22-1~deb12u2' },
  { name: 'libargon2-1', version: '0~20171227-0.3+deb12u1' },
  { name: 'libjson-c5', version: '0.16-2' },
  { name: 'libudev1', version: '252.39-1~deb12u2' },
  { name: 'libselinux1', version: '3.4-1+b6' },
  { name: 'libpcre2-8-0', version: '10.42-1+deb12u2' },
  { name: 'libext2fs2', version: '1.47.0-2+b2' },
  { name: 'libcom-err2', version: '1.47.0-2+b2' },
  // openssh-server's sshd (emergency SSH access, docs/workflows/emergency-ssh.md) and the libraries it links.
  { name: 'openssh-server', version: '1:9.2p1-2+deb12u10' },
  { name: 'libcrypt1', version: '1:4.4.33-2' },
  { name: 'libwrap0', version: '7.6.q-32' },
  { name: 'libaudit1', version: '1:3.0.9-1' },
  { name: 'libpam0g', version: '1.5.2-6+deb12u2' },
  { name: 'libsystemd0', version: '252.39-1~deb12u2' },
  { name: 'libgssapi-krb5-2', version: '1.20.1-2+deb12u5' },
  { name: 'libkrb5-3', version: '1.20.1-2+deb12u5' },
  { name: 'libk5crypto3', version: '1.20.1-2+deb12u5' },
  { name: 'libkrb5support0', version: '1.20.1-2+deb12u5' },
  { name: 'libkeyutils1', version: '1.6.3-2' },
  { name: 'zlib1g', version: '1:1.2.13.dfsg-1' },
  { name: 'libnsl2', version: '1.3.0-2' },
  { name: 'libcap-ng0', version: '0.8.3-1+b3' },
  { name: 'libcap2', version: '1:2.66-4+deb12u3+b1' },
  { name: 'libgcrypt20', version: '1.10.1-3+deb12u1' },
  { name: 'liblzma5', version: '5.4.1-1+deb12u2' },
  { name: 'libzstd1', version: '1.5.4+dfsg2-5' },
  { name: 'liblz4-1', version: '1.9.4-1' },
  { name: 'libtirpc3', version: '1.3.3+ds-1' },
  { name: 'libgpg-error0', version: '1.46-1' },
];

export const ALL_PACKAGES: readonly DebianPackage[] = [KERNEL_PACKAGE, STUB_PACKAGE, ...USERLAND_PACKAGES];

/** The default cache: /var/cache/constellation/debs for root, else ~/.cache/constellation/debs ($XDG_CACHE_HOME honoured). */
export function defaultPackageCache(
  env: NodeJS.ProcessEnv = process.env,
  uid = process.getuid?.() ?? -1,
  home = os.homedir(),
): string {
  if (env.CONSTELLATION_PACKAGE_CACHE) return path.resolve(env.CONSTELLATION_PACKAGE_CACHE);
  if (uid === 0) return '/var/cache/constellation/debs';
  const xdg =
    env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(home, '.cache');
  return path.join(xdg, 'constellation', 'debs');
}

/** The cache file of a package: `<name>_<version>_amd64.deb`, the epoch's ':' written '%3a' as apt does. */
export function debFileName(pkg: DebianPackage): string {
  return `${pkg.name}_${pkg.version.replace(/:/g, '%3a')}_amd64.deb`;
}

export interface FetchedPackage extends DebianPackage {
  file: string;
  sha256: string;
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

export async function sha256File(file: string): Promise<string> {
  return createHash('sha256')
    .update(await fs.readFile(file))
    .digest('hex');
}

export interface FetchOptions {
  cacheDir: string;
  run: CommandRunner;
  /** Whether a missing package may be downloaded (false: a missing one is an error naming the fetch script). */
  download: boolean;
  progress?: (message: string) => void;
}

/** Every package's .deb from the cache, fetching what is missing; each with its SHA-256. */
export async function fetchPackages(
  packages: readonly DebianPackage[],
  options: FetchOptions,
): Promise<FetchedPackage[]> {
  const { cacheDir, run } = options;
  const missing: DebianPackage[] = [];
  for (const pkg of packages) if (!(await exists(path.join(cacheDir, debFileName(pkg))))) missing.push(pkg);
  if (missing.length > 0) {
    const names = missing.map((p) => `${p.name}=${p.version}`);
    if (!options.download) {
      throw new UserError(
        `The package cache ${cacheDir} lacks ${missing.length} Debian package(s) the node image needs: ${names.join(', ')}.`,
        {
          hint: 'Fill it first: `bash scripts/fetch-image-inputs.sh` (it runs apt-get download), or point CONSTELLATION_PACKAGE_CACHE at a filled cache.',
        },
      );
    }
    options.progress?.(`downloading ${missing.length} package(s) into ${cacheDir}`);
    await fs.mkdir(cacheDir, { recursive: true });
    const temp = await fs.mkdtemp(path.join(cacheDir, '.download-'));
    try {
      let result = await run('apt-get', ['download', ...names], { cwd: temp });
      if (result.code !== 0 && /Unable to locate|Can't select|has no installation candidate/i.test(result.stderr)) {
        // Empty or stale package lists: update them once, then try again.
        options.progress?.('apt-get update');
        await run('apt-get', ['update'], {});
        result = await run('apt-get', ['download', ...names], { cwd: temp });
      }
      if (result.code !== 0) {
        throw new UserError(
          `apt-get download failed for ${names.join(', ')}: ${result.stderr.trim().split('\n').slice(-3).join(' ')}`,
          {
            hint: 'The image pins exact Debian versions (lib/node-image/build/packages.ts). Check that this machine reaches a Debian bookworm mirror (apt-get update), or fill the package cache from one that does.',
          },
        );
      }
      for (const pkg of missing) {
        const name = debFileName(pkg);
        if (!(await exists(path.join(temp, name)))) throw new UserError(`apt-get download did not produce ${name}.`);
        await fs.rename(path.join(temp, name), path.join(cacheDir, name));
      }
    } finally {
      await fs.rm(temp, { recursive: true, force: true });
    }
  }
  const out: FetchedPackage[] = [];
  for (const pkg of packages) {
    const file = path.join(cacheDir, debFileName(pkg));
    out.push({ ...pkg, file, sha256: await sha256File(file) });
  }
  return out;
}
