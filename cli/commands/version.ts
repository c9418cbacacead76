import { BaseCommand } from '../base-command.js';
import { SUPPORTED_KUBERNETES_VERSIONS } from '../../lib/config/versions.js';

export default class Version extends BaseCommand<typeof Version> {
  static override description = 'Show the CLI version, the Kubernetes versions it supports and the Node.js version it runs on.';
  static override examples = ['<%= config.bin %> version', '<%= config.bin %> version --json'];
  static override enableJsonFlag = true;

  public async run(): Promise<{ version: string; kubernetesVersions: string[]; nodeVersion: string }> {
    const info = {
      version: this.config.version,
      kubernetesVersions: [...SUPPORTED_KUBERNETES_VERSIONS],
      nodeVersion: process.version,
    };
    if (!this.jsonEnabled()) {
      this.log(`Version:             v${info.version}`);
      this.log(`Kubernetes versions: ${info.kubernetesVersions.join(', ')}`);
      this.log(`Node.js:             ${info.nodeVersion}`);
    }
    return info;
  }
}
