import { Args, Flags } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import type { CreateIamResult, IamCloud } from '../../iam/index.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';

const CLOUD_NAMES: Record<IamCloud, string> = { aws: 'AWS', azure: 'Azure', gcp: 'GCP' };

export default class IamCreate extends BaseCommand<typeof IamCreate> {
  static override summary = 'Create the cloud identities the nodes need (AWS, Azure or GCP).';
  static override description = `Makes, with your cloud credentials, the identities the nodes run as. AWS: an IAM role with an inline policy and an instance profile for the control-plane nodes, and the same for the workers. Azure: a user-assigned managed identity with the roles Virtual Machine Contributor and Network Contributor on the cluster's resource group (made unless it exists). GCP: a service account for the CLI with a key (written to gcpServiceAccountKey.json), and one for the nodes with a custom role, each with its project role bindings.

Every identity is recorded in the workspace as soon as the cloud made it: an interrupted run continues when run again, and \`constellation iam destroy\` deletes exactly these. Flags not given default to the workspace config's provider section. With --update-config the resulting names (and the flags you gave) are written into constellation-conf.yaml, keeping its comments; without it they are printed. Files are never overwritten.`;

  static override examples = [
    {
      description: 'AWS identities, written into the workspace config:',
      command: '<%= config.bin %> <%= command.id %> aws --zone us-east-2a --update-config',
    },
    {
      description: 'Azure identities in a new resource group, without a question:',
      command:
        '<%= config.bin %> <%= command.id %> azure --subscription 0d202bbb-4fa7-4af8-8125-58c269a05435 --location westeurope --resource-group my-cluster-rg --update-config -y',
    },
    {
      description: 'GCP service accounts with the prefix "demo":',
      command:
        '<%= config.bin %> <%= command.id %> gcp --project my-project --zone europe-west3-a --prefix demo --update-config',
    },
  ];

  static override args = {
    cloud: Args.string({
      description: 'The cloud to make identities in: aws, azure or gcp.',
      options: ['aws', 'azure', 'gcp'],
      required: true,
    }),
  };

  static override flags = {
    prefix: Flags.string({
      description:
        "Name prefix of every identity made (also accepted as --serviceAccountID, upstream's deprecated GCP name).",
      aliases: ['serviceAccountID'],
      default: 'constellation',
      helpValue: '<prefix>',
    }),
    'update-config': Flags.boolean({
      description: 'Write the identities (and the flags given) into constellation-conf.yaml under provider.<cloud>.',
    }),
    yes: Flags.boolean({ char: 'y', description: 'Create without asking for confirmation.' }),
    region: Flags.string({
      description:
        "AWS or GCP region (default: derived from --zone, else the config); for Azure the same as --location (upstream's name).",
      helpValue: '<region>',
      helpGroup: 'AWS AND GCP',
    }),
    zone: Flags.string({
      description: 'AWS availability zone or GCP zone of the nodes.',
      helpValue: '<zone>',
      helpGroup: 'AWS AND GCP',
    }),
    subscription: Flags.string({
      description: "Azure subscription ID (also --subscriptionID, upstream's name).",
      aliases: ['subscriptionID'],
      helpValue: '<id>',
      helpGroup: 'AZURE',
    }),
    location: Flags.string({
      description: 'Azure location (region), e.g. westeurope.',
      helpValue: '<location>',
      helpGroup: 'AZURE',
    }),
    'resource-group': Flags.string({
      description:
        "Azure resource group of the identity and the cluster (default: <prefix>-rg; made unless it exists; also --resourceGroup, upstream's name).",
      aliases: ['resourceGroup'],
      helpValue: '<name>',
      helpGroup: 'AZURE',
    }),
    servicePrincipal: Flags.string({
      description:
        "Name of the Azure managed identity the nodes run as (default: <prefix>-nodes); upstream's name for it.",
      helpValue: '<name>',
      helpGroup: 'AZURE',
    }),
    tenant: Flags.string({
      description: 'Azure tenant (directory) ID (default: the tenant of your credentials).',
      helpValue: '<id>',
      helpGroup: 'AZURE',
    }),
    project: Flags.string({
      description: "GCP project ID (also --projectID, upstream's name).",
      aliases: ['projectID'],
      helpValue: '<id>',
      helpGroup: 'GCP',
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<CreateIamResult | { created: false }> {
    const cloud = this.args.cloud as IamCloud;
    const [{ confirmOrStop }, { createIam, iamFlagInputs, resolveIamInputs }] = await Promise.all([
      import('../../confirm.js'),
      import('../../iam/index.js'),
    ]);
    const { withWorkspaceSession } = await import('../../cluster/session.js');
    const { inputs: flags, notInConfig } = iamFlagInputs(
      cloud,
      this.flags as unknown as Record<string, string | undefined>,
    );
    const inputs = await resolveIamInputs(this.workspaceDir, cloud, flags);
    if (inputs.configProblem) this.warn(`The workspace config is not used for defaults: ${inputs.configProblem}`);

    if (!this.jsonEnabled()) {
      const inputKeys = Object.keys(flags).filter((key) => inputs.providerConfig[key] !== undefined);
      const shown = [
        `prefix=${this.flags.prefix}`,
        ...inputKeys.map((key) => `${key}=${String(inputs.providerConfig[key])}`),
      ];
      this.log(`${CLOUD_NAMES[cloud]} identities to create: ${shown.join(', ')}`);
    }
    await confirmOrStop(
      `Create the ${CLOUD_NAMES[cloud]} identities?`,
      { yes: this.flags.yes },
      'Nothing was created.',
    );

    const result = await withWorkspaceSession(this.workspaceDir, `iam create ${cloud}`, ({ journal, log }) =>
      createIam({
        workspaceDir: this.workspaceDir,
        provider: cloud,
        prefix: this.flags.prefix,
        providerConfig: inputs.providerConfig,
        updateConfig: this.flags['update-config'],
        alsoInConfig: Object.fromEntries(Object.entries(inputs.given).filter(([key]) => !notInConfig.includes(key))),
        journal,
        log,
        progress: this.jsonEnabled() ? undefined : (m) => this.logToStderr(`  ${m}`),
      }),
    );
    if (!this.jsonEnabled()) this.render(result);
    return result;
  }

  private render(result: CreateIamResult): void {
    const shown = (f: string) => path.relative(process.cwd(), f) || f;
    this.log(
      `Created the ${CLOUD_NAMES[result.provider as IamCloud]} identities (${result.identities.length} recorded in the workspace).`,
    );
    for (const file of result.files) this.log(`Wrote ${shown(file)}.`);
    const lines = Object.entries(result.configUpdates).map(([k, v]) => `  ${k}: ${String(v)}`);
    if (result.configUpdated) {
      this.log(
        `Updated provider.${result.provider} in ${shown(path.join(this.workspaceDir, CONFIG_FILE))}:\n${lines.join('\n')}`,
      );
    } else {
      this.log(
        `Set these under provider.${result.provider} in ${CONFIG_FILE} (or run again with --update-config):\n${lines.join('\n')}`,
      );
    }
  }
}
