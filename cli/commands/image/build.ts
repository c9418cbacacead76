import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class ImageBuild extends BaseCommand<typeof ImageBuild> {
  static override summary =
    'Build a node image (raw GPT disk with one unified kernel image) from Debian packages and npm, with signed measurements.';
  static override description = `Builds a node image for a provider: a raw GPT disk whose EFI system partition holds one unified kernel image (systemd-stub + Debian's cloud kernel + an initrd with the whole node userland + a kernel command line naming the provider), measurements.json and measurements.json.sig (PCR 4, 9 and 11 predicted from the image, signed with your image key, the one \`mini image create\` uses) and manifest.json (every input with its version and SHA-256, every output). For clouds also the upload format: azure a fixed VHD, gcp disk.raw in a .tar.gz, aws the raw disk. Two builds from the same inputs give the same bytes.

Debian packages are fetched with apt-get download into a cache (--package-cache; default /var/cache/constellation/debs as root, else ~/.cache/constellation/debs) and reused. See docs/workflows/node-images.md.`;

  static override examples = [
    {
      description: 'Build an image for QEMU VMs into ./image:',
      command: '<%= config.bin %> <%= command.id %> --provider qemu --out image',
    },
    {
      description: 'Build an Azure image with Kubernetes binaries:',
      command: '<%= config.bin %> <%= command.id %> --provider azure --version v1.0.0 --kubernetes-binaries ./k8s-bin',
    },
  ];

  static override flags = {
    provider: Flags.string({
      description: 'The provider the image boots on (named on its kernel command line).',
      options: ['qemu', 'aws', 'azure', 'gcp'],
      required: true,
    }),
    out: Flags.string({
      description: 'Folder for the image files (default: ./constellation-image-<provider>).',
      helpValue: '<dir>',
    }),
    version: Flags.string({ description: "The image's version (default: v<CLI version>).", helpValue: '<version>' }),
    'kubernetes-binaries': Flags.string({
      description:
        'Folder with kubeadm, kubelet, kubectl, containerd (runc, crictl optional) and images/*.tar; the image then runs the kubeadm backend, else none.',
      helpValue: '<dir>',
    }),
    'package-cache': Flags.string({
      description:
        'Folder of cached Debian packages (default: $CONSTELLATION_PACKAGE_CACHE, /var/cache/constellation/debs as root, else ~/.cache/constellation/debs).',
      helpValue: '<dir>',
    }),
    'no-download': Flags.boolean({ description: 'Fail instead of downloading packages missing from the cache.' }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    dir: string;
    rawDisk: string;
    measurements: Record<string, { expected: string; warnOnly: boolean }>;
    outputs: { name: string; sha256: string; size: number }[];
    keyFile: string;
  }> {
    const [
      { buildNodeImage, BUILD_STEPS },
      { defaultBuildDeps, defaultNodeProgramDir, pinnedNodeBinary },
      { defaultPackageCache },
      { cliVersion },
      { runWithSteps, rendererFor },
      path,
    ] = await Promise.all([
      import('../../../lib/node-image/build/index.js'),
      import('../../../lib/node-image/build/defaults.js'),
      import('../../../lib/node-image/build/packages.js'),
      import('../../../lib/config/package-info.js'),
      import('../../cluster/reporter.js'),
      import('node:path'),
    ]);
    const provider = this.flags.provider as 'qemu' | 'aws' | 'azure' | 'gcp';
    const outDir = path.resolve(this.flags.out ?? `constellation-image-${provider}`);
    const epoch = process.env.SOURCE_DATE_EPOCH ? Number(process.env.SOURCE_DATE_EPOCH) : undefined;
    const built = await runWithSteps(BUILD_STEPS, rendererFor(process.stdout, this.jsonEnabled()), async (report) =>
      buildNodeImage(
        {
          provider,
          outDir,
          version: this.flags.version ?? `v${cliVersion()}`,
          packageCache: path.resolve(this.flags['package-cache'] ?? defaultPackageCache()),
          nodeProgramDir: defaultNodeProgramDir(),
          node: await pinnedNodeBinary(),
          kubernetesBinaries: this.flags['kubernetes-binaries'] && path.resolve(this.flags['kubernetes-binaries']),
          sourceDateEpoch: Number.isFinite(epoch) ? epoch : undefined,
          download: !this.flags['no-download'],
        },
        defaultBuildDeps(report),
      ),
    );
    const { manifest } = built;
    if (!this.jsonEnabled()) {
      this.log(
        `Node image ${manifest.name} (${manifest.attestationVariant}, Kubernetes backend ${manifest.kubernetesBackend}) in ${built.dir}:`,
      );
      for (const out of manifest.outputs) this.log(`  ${out.name.padEnd(40)} ${out.sha256}`);
      this.log('Measurements:');
      for (const [index, m] of Object.entries(manifest.measurements))
        this.log(`  PCR ${index.padStart(2)}: ${m.expected}${m.warnOnly ? ' (warn only)' : ''}`);
      this.log(`Signed with your image key ${built.keyFile}${built.keyCreated ? ' (made now; keep it)' : ''}.`);
    }
    return {
      dir: built.dir,
      rawDisk: built.rawDisk,
      measurements: manifest.measurements,
      outputs: manifest.outputs,
      keyFile: built.keyFile,
    };
  }
}
