import { BaseCommand } from '../base-command.js';
import { SUPPORTED_KUBERNETES_VERSIONS } from '../../lib/config/versions.js';

export default class Version extends BaseCommand<typeof Version> {
  static override description =
    'Show the CLI version (and the git commit of a source build), the Kubernetes versions it supports and the Node.js version it runs on.';
  static override examples = ['<%= config.bin %> version', '<%= config.bin %> version --json'];
  static override enableJsonFlag = true;

  public async run(): Promise<{ version: string; commit?: string; kubernetesVersions: string[]; nodeVersion: string }> {
    const [{ sourceCommit }, { packageRoot }] = await Promise.all([
      import('../../lib/source-commit.js'),
      import('../../lib/config/package-info.js'),
    ]);
    const commit = await sourceCommit(packageRoot());
    const info = {
      version: this.config.version,
      ...(commit ? { commit } : {}),
      kubernetesVersions: [...SUPPORTED_KUBERNETES_VERSIONS],
      nodeVersion: process.version,
    };
    if (!this.jsonEnabled()) {
      this.log(`Version:             v${info.version}${commit ? ` (commit ${commit.slice(0, 12)})` : ''}`);
      this.log(`Kubernetes versions: ${info.kubernetesVersions.join(', ')}`);
      this.log(`Node.js:             ${info.nodeVersion}`);
    }
    return info;
  }
}
