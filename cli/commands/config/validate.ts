import { Args } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';

export default class ConfigValidate extends BaseCommand<typeof ConfigValidate> {
  static override summary = 'Check a config and say what is wrong, with key path and line.';
  static override description = `Reads constellation-conf.yaml (the workspace's, or the file you name) and checks everything \`create\` relies on: YAML syntax, unknown keys, types, exactly one provider and one attestation variant, the Kubernetes version, instance types allowed for the variant, disk types, node counts and measurements. Every problem is printed as <file>:<line>: <key path>: <message>; the exit code is 1 if there is any.`;

  static override examples = [
    { description: "Check the workspace's config:", command: '<%= config.bin %> <%= command.id %>' },
    {
      description: 'Check another file, as JSON (for CI):',
      command: '<%= config.bin %> <%= command.id %> ./staging/constellation-conf.yaml --json',
    },
  ];

  static override args = {
    file: Args.string({ description: `Config file to check. Default: ${CONFIG_FILE} in the workspace (-C).` }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    valid: true;
    file: string;
    provider: string;
    attestationVariant: string;
    kubernetesVersion: string;
  }> {
    const { loadConfig, attestationVariantOf, providerOf } = await import('../../../lib/config/index.js');
    const file = this.args.file ? path.resolve(this.args.file) : path.join(this.workspaceDir, CONFIG_FILE);
    const displayPath = path.relative(process.cwd(), file) || file;
    const config = await loadConfig(path.dirname(file), { fileName: path.basename(file), displayPath });
    const result = {
      valid: true as const,
      file: displayPath,
      provider: providerOf(config),
      attestationVariant: attestationVariantOf(config),
      kubernetesVersion: config.kubernetesVersion,
    };
    if (!this.jsonEnabled()) {
      this.log(
        `${displayPath} is valid: provider ${result.provider}, attestation variant ${result.attestationVariant}, Kubernetes ${result.kubernetesVersion}.`,
      );
    }
    return result;
  }
}
