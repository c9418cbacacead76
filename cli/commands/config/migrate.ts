import { Args, Flags } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';

export default class ConfigMigrate extends BaseCommand<typeof ConfigMigrate> {
  static override summary =
    "Turn an upstream Constellation config (v2, v3 or v4 layout) into this CLI's, naming every key it cannot carry.";
  static override description = `Reads a constellation-conf.yaml of upstream Constellation (the Go CLI, releases v2.x: layouts version v2, v3 and v4) and writes this CLI's config: the provider's settings (aws, azure, gcp, and upstream's qemu as provider.qemu), the cloud identities, node groups (v2 and v3's one instance type and disk for both groups), Kubernetes version where supported, tags, the attestation variant and its TCB minimums. Every key it does not carry is listed with the reason.

Two things never carry: upstream's \`image\` (a release of upstream's node images, which this CLI does not run) and those images' measurements (our images measure differently: carried, they would refuse every node). Give yours with --image and --measurements (the measurements.json that \`constellation image build\` writes), or fill them afterwards; what \`config validate\` would still refuse is listed after the migration.

It never overwrites a file without asking: the output (default: constellation-conf.yaml in the workspace) must not exist, unless you confirm, or pass -y; when the output is the upstream file itself, that file is kept beside it as <name>.upstream-<version>.`;

  static override examples = [
    {
      description: 'Migrate an upstream workspace in place (asks first; keeps constellation-conf.yaml.upstream-v4):',
      command: '<%= config.bin %> <%= command.id %> -C ./my-upstream-cluster',
    },
    {
      description: 'Into a new workspace, with your image and its measurements:',
      command:
        '<%= config.bin %> <%= command.id %> ../old/constellation-conf.yaml -C ./new --image ami-0123456789abcdef0 --measurements ./image/measurements.json',
    },
  ];

  static override args = {
    file: Args.string({ description: `The upstream config. Default: ${CONFIG_FILE} in the workspace (-C).` }),
  };

  static override flags = {
    out: Flags.string({
      description: `Where the migrated config goes. Default: ${CONFIG_FILE} in the workspace (-C).`,
      helpValue: '<file>',
    }),
    image: Flags.string({
      description:
        'Your node image for `image` (AMI id, Azure image id, GCE image URL, or for qemu an image folder or store version).',
      helpValue: '<image>',
    }),
    measurements: Flags.string({
      description: "Your image's measurements.json (written by `constellation image build`).",
      helpValue: '<file>',
    }),
    set: Flags.string({
      description: 'Set a key of the migrated config, as key.path=value; repeatable.',
      helpValue: '<key=value>',
      multiple: true,
    }),
    yes: Flags.boolean({ char: 'y', description: 'Replace an existing output file without asking.' }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<object> {
    const [{ migrateConfigFile }, { confirmOrStop }, { readRegularFile, SIZE_LIMITS }] = await Promise.all([
      import('../../../lib/config/migrate.js'),
      import('../../confirm.js'),
      import('../../../lib/workspace/regular-file.js'),
    ]);
    const input = this.args.file ? path.resolve(this.args.file) : path.join(this.workspaceDir, CONFIG_FILE);
    const output = this.flags.out ? path.resolve(this.flags.out) : path.join(this.workspaceDir, CONFIG_FILE);
    let measurements: unknown;
    if (this.flags.measurements) {
      const text = await readRegularFile(path.resolve(this.flags.measurements), {
        what: 'the measurements file',
        maxBytes: SIZE_LIMITS.measurements,
      });
      try {
        measurements = JSON.parse(text.toString('utf8'));
      } catch (err) {
        const { UserError } = await import('../../../lib/errors.js');
        throw new UserError(`${this.flags.measurements} is not JSON: ${(err as Error).message}`, {
          hint: 'Give the measurements.json that `constellation image build` writes beside the image.',
        });
      }
    }
    const json = this.jsonEnabled();
    const result = await migrateConfigFile({
      input,
      output,
      image: this.flags.image,
      measurements,
      set: this.flags.set,
      replace: async (file) => {
        const question = `${shown(file)} exists. Replace it with the migrated config?`;
        await confirmOrStop(
          question,
          { yes: this.flags.yes, ...(json ? { interactive: false } : {}) },
          `Nothing was written; ${shown(file)} is unchanged.`,
        );
        return true;
      },
    });
    if (!json) {
      this.log(
        `Wrote ${shown(result.output)} from upstream's ${result.fromVersion} layout: provider ${result.provider}, attestation variant ${result.variant}.`,
      );
      if (result.backup) this.log(`The upstream file is kept as ${shown(result.backup)}.`);
      if (result.notes.length > 0) {
        this.log('Carried differently:');
        for (const note of result.notes) this.log(`  ${note}`);
      }
      this.log(result.dropped.length === 0 ? 'Every key was carried.' : `Not carried (${result.dropped.length}):`);
      for (const d of result.dropped) this.log(`  ${d.path}: ${d.reason}`);
      if (result.problems.length === 0) this.log('The migrated config is valid (`constellation config validate`).');
      else {
        this.log(
          `Still to fill before \`constellation create\` (${result.problems.length}; \`constellation config validate\` names them with their lines):`,
        );
        for (const p of result.problems) this.log(`  ${p.path ? `${p.path}: ` : ''}${p.message}`);
      }
    }
    return {
      ...result,
      output: shown(result.output),
      ...(result.backup ? { backup: shown(result.backup) } : {}),
      valid: result.problems.length === 0,
    };
  }
}

function shown(file: string): string {
  return path.relative(process.cwd(), file) || file;
}
