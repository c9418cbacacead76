import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../base-command.js';
import type { UpgradeIamResult } from '../../../iam/index.js';

export default class IamUpgradeApply extends BaseCommand<typeof IamUpgradeApply> {
  static override summary = 'Update the cloud identities `iam create` made to the permissions this CLI needs.';
  static override description = `A newer CLI may give the nodes' identities other permissions than the CLI that made them (upstream Constellation's \`iam upgrade apply\`). This compares what the identities the workspace records as made by \`constellation iam create\` have with what this CLI gives them, shows every permission it would add or remove, asks, and updates them. AWS: the inline policy of each node role. Azure: the role assignments of the nodes' managed identity. GCP: the permissions of the nodes' custom role. Nothing else is changed; identities made outside this workspace are not looked at.`;

  static override examples = [
    {
      description: 'Show the changes and apply them after a question:',
      command: '<%= config.bin %> <%= command.id %>',
    },
    { description: 'In a script (no question):', command: '<%= config.bin %> <%= command.id %> -y' },
  ];

  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Update without asking for confirmation.' }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<UpgradeIamResult> {
    const [{ confirmOrStop }, { upgradeIam }] = await Promise.all([
      import('../../../confirm.js'),
      import('../../../iam/index.js'),
    ]);
    const { withWorkspaceSession } = await import('../../../cluster/session.js');
    const result = await withWorkspaceSession(this.workspaceDir, 'iam upgrade apply', async ({ journal, log }) => {
      const run = {
        workspaceDir: this.workspaceDir,
        journal,
        log,
        progress: this.jsonEnabled() ? undefined : (m: string) => this.logToStderr(`  ${m}`),
      };
      const plan = await upgradeIam({ ...run, apply: false });
      if (plan.changes.length === 0) return plan;
      if (!this.jsonEnabled()) {
        this.log('Permissions to change:');
        for (const c of plan.changes) {
          this.log(`  ${c.provider} ${c.identity}`);
          for (const p of c.add) this.log(`    + ${p}`);
          for (const p of c.remove) this.log(`    - ${p}`);
        }
      }
      await confirmOrStop(
        `Update the permissions of ${plan.changes.length} ${plan.changes.length === 1 ? 'identity' : 'identities'}?`,
        { yes: this.flags.yes },
        'Nothing was changed.',
      );
      return upgradeIam({ ...run, apply: true });
    });
    if (!this.jsonEnabled()) {
      if (result.providers.length === 0)
        this.log('The workspace records no identities made by `iam create`: nothing to upgrade.');
      else if (result.changes.length === 0)
        this.log(
          `The identities (${result.providers.join(', ')}) have the permissions this CLI needs: nothing to change.`,
        );
      else
        this.log(
          `Updated ${result.changes.length} ${result.changes.length === 1 ? 'identity' : 'identities'} (${result.providers.join(', ')}).`,
        );
    }
    return result;
  }
}
