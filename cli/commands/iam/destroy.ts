import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';
import type { DestroyIamResult } from '../../iam/index.js';

export default class IamDestroy extends BaseCommand<typeof IamDestroy> {
  static override summary = 'Delete the cloud identities `iam create` made in this workspace.';
  static override description = `Deletes exactly the identities the workspace records as made by \`constellation iam create\` (roles, instance profiles, managed identities, role assignments, service accounts, keys), in reverse dependency order; nothing of the cluster itself. It lists them and asks first. Deleted identities are forgotten at once, so an interrupted run continues when run again. Files and config values that \`iam create\` wrote stay as they are.`;

  static override examples = [
    { description: 'Delete the identities, after a question:', command: '<%= config.bin %> <%= command.id %>' },
    {
      description: 'In a script (no question), in another workspace:',
      command: '<%= config.bin %> <%= command.id %> -y -C ./my-cluster',
    },
  ];

  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Delete without asking for confirmation.' }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<DestroyIamResult> {
    const [{ confirmOrStop }, { destroyIam, listIamIdentities }] = await Promise.all([
      import('../../confirm.js'),
      import('../../iam/index.js'),
    ]);
    const { withWorkspaceSession } = await import('../../cluster/session.js');
    const result = await withWorkspaceSession(this.workspaceDir, 'iam destroy', async ({ journal, log }) => {
      const identities = await listIamIdentities(journal);
      if (identities.length === 0) return { providers: [], destroyed: [] };
      if (!this.jsonEnabled()) {
        this.log('Identities to delete:');
        for (const i of identities) this.log(`  ${i.kind} ${i.id}`);
      }
      await confirmOrStop(
        `Delete these ${identities.length} identities?`,
        { yes: this.flags.yes },
        'Nothing was deleted.',
      );
      return destroyIam({
        workspaceDir: this.workspaceDir,
        journal,
        log,
        progress: this.jsonEnabled() ? undefined : (m) => this.logToStderr(`  ${m}`),
      });
    });
    if (!this.jsonEnabled()) {
      this.log(
        result.destroyed.length === 0
          ? 'The workspace records no identities made by `iam create`: nothing to delete.'
          : `Deleted ${result.destroyed.length} identities (${result.providers.join(', ')}).`,
      );
    }
    return result;
  }
}
