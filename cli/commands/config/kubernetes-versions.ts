import { BaseCommand } from '../../base-command.js';
import { DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS } from '../../../lib/config/versions.js';

export default class ConfigKubernetesVersions extends BaseCommand<typeof ConfigKubernetesVersions> {
  static override summary = 'List the Kubernetes versions this CLI can create clusters with.';
  static override description =
    'Prints the supported Kubernetes versions, oldest first, and marks the one `config generate` writes by default. Use one of them (or its minor version, e.g. v1.32) with `config generate -k`.';

  static override examples = ['<%= config.bin %> <%= command.id %>', '<%= config.bin %> <%= command.id %> --json'];
  static override enableJsonFlag = true;

  public async run(): Promise<{ versions: string[]; default: string }> {
    const result = { versions: [...SUPPORTED_KUBERNETES_VERSIONS], default: DEFAULT_KUBERNETES_VERSION };
    if (!this.jsonEnabled()) {
      for (const v of result.versions) this.log(v === result.default ? `${v} (default)` : v);
    }
    return result;
  }
}
