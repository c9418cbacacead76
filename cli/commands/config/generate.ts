import { Args, Flags } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import { ATTESTATION_VARIANTS, PROVIDERS, PROVIDER_VARIANTS } from '../../../lib/config/variants.js';
import { DEFAULT_KUBERNETES_VERSION } from '../../../lib/config/versions.js';

export default class ConfigGenerate extends BaseCommand<typeof ConfigGenerate> {
  static override summary = 'Write a new config (constellation-conf.yaml) and an empty state file for a provider.';
  static override description = `Writes constellation-conf.yaml with defaults for the provider (node groups, instance and disk types, the attestation variant and its measurements) and an empty constellation-state.yaml into the workspace. It never overwrites: if either file exists, it writes neither.

Default attestation variants: ${PROVIDERS.map((p) => `${p} → ${PROVIDER_VARIANTS[p][0]}`).join(', ')}.
For a cloud, fields only your account knows are left empty: \`constellation iam create <cloud> --update-config\` fills the identities; set \`image\` to your node image and its measurements (written as all-zero placeholders) to the image's: \`constellation image build\` writes them, \`constellation config fetch-measurements\` fetches a published image's. \`constellation config validate\` names whatever is still missing, an enforced PCR left at zero included.`;

  static override examples = [
    {
      description: 'A cluster on this machine (local provider):',
      command: '<%= config.bin %> <%= command.id %> local',
    },
    {
      description: 'An Azure cluster on Intel TDX with Kubernetes 1.31, tagged for billing:',
      command: '<%= config.bin %> <%= command.id %> azure -a azure-tdx -k v1.31 -t team=infra -t env=dev',
    },
    {
      description: 'Into another workspace directory:',
      command: '<%= config.bin %> <%= command.id %> gcp -C ./my-cluster',
    },
  ];

  static override args = {
    provider: Args.string({
      description:
        'Where the cluster runs: local (processes on this machine), qemu (VMs on this machine), aws, azure or gcp.',
      options: [...PROVIDERS],
      required: true,
    }),
  };

  static override flags = {
    kubernetes: Flags.string({
      char: 'k',
      description: `Kubernetes version: v1.32, 1.32 or an exact supported version (see \`config kubernetes-versions\`). Default: ${DEFAULT_KUBERNETES_VERSION}.`,
      helpValue: '<version>',
    }),
    attestation: Flags.string({
      char: 'a',
      description:
        "Attestation variant the nodes must prove; it must run on the provider. Default: the provider's default.",
      options: [...ATTESTATION_VARIANTS],
    }),
    tags: Flags.string({
      char: 't',
      description: 'Tag for every cloud resource, as key=value; repeat the flag or separate tags with commas.',
      helpValue: '<key=value>',
      multiple: true,
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    configFile: string;
    stateFile: string;
    provider: string;
    attestationVariant: string;
    kubernetesVersion: string;
  }> {
    const { generateConfigFiles, parseTags, attestationVariantOf } = await import('../../../lib/config/index.js');
    const { config, configFile, stateFile } = await generateConfigFiles(this.workspaceDir, this.args.provider, {
      kubernetesVersion: this.flags.kubernetes,
      attestationVariant: this.flags.attestation,
      tags: parseTags(this.flags.tags ?? []),
    });
    const result = {
      configFile,
      stateFile,
      provider: this.args.provider,
      attestationVariant: attestationVariantOf(config),
      kubernetesVersion: config.kubernetesVersion,
    };
    if (!this.jsonEnabled()) {
      const shown = (f: string) => path.relative(process.cwd(), f) || f;
      this.log(`Wrote ${shown(configFile)} and ${shown(stateFile)}.`);
      this.log(
        `Provider ${result.provider}, attestation variant ${result.attestationVariant}, Kubernetes ${result.kubernetesVersion}.`,
      );
      if (result.provider === 'local') {
        this.log('Next: review the file; `constellation config validate` checks it.');
      } else if (result.provider === 'qemu') {
        this.log(
          'Next: set `image` to a built qemu image (`constellation image build --provider qemu --out <dir>`), or run `constellation mini up --vm`, which builds one.',
        );
      } else {
        this.log(
          `Next: \`constellation iam create ${result.provider} --update-config\` fills the cloud identities; set \`image\` to your node image;`,
        );
        this.log(
          "fill the measurements (placeholders now: all zeros) with your image's: `constellation image build` writes them, `constellation config fetch-measurements` fetches a published image's;",
        );
        this.log('then `constellation config validate` names anything still missing.');
      }
    }
    return result;
  }
}
