import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';
import type { RecoverResult } from '../cluster/recover.js';

export default class Recover extends BaseCommand<typeof Recover> {
  static override summary =
    'Bring back control-plane nodes that rebooted when no join service was left, with the master secret.';
  static override description = `When every control-plane node rebooted, no join service is left to give them their disk keys, and each waits with its recovery server (port 9999; \`constellation status\` shows awaiting-recovery). recover reads constellation-mastersecret.json, and for each such node verifies its attestation against the config's measurements and only then sends it the master secret, sealed to the attested node. The node derives its disk key, unlocks its state disk, and is back; its join service starts again, and workers rejoin through it.

Without -e, recover asks every control-plane node the provider lists, concurrently, and skips those that are back already. With -e it asks that address (a node, or the load balancer in front of the control planes) again after each success, until no recovery server answers. A node or load balancer that does not answer yet is asked again for up to --timeout seconds.

A node that fails attestation gets nothing (the error names the PCR). A wrong master secret is refused by the node, which keeps waiting unchanged.`;

  static override examples = [
    {
      description: 'Recover every control-plane node of the cluster in the current workspace:',
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description: 'Recover through the load balancer (or one node):',
      command: '<%= config.bin %> <%= command.id %> -e 10.213.4.1',
    },
  ];

  static override enableJsonFlag = true;

  static override flags = {
    endpoint: Flags.string({
      char: 'e',
      description: 'A recovery server (node or load balancer), HOST[:PORT] (port default 9999).',
      helpValue: 'HOST[:PORT]',
    }),
    timeout: Flags.integer({
      description: 'Seconds to keep asking a node or load balancer that does not answer yet.',
      default: 120,
      min: 1,
    }),
  };

  public async run(): Promise<RecoverResult> {
    const [{ withDebugLog }, { recoverCluster }, { workspaceInfrastructure }, { FileResourceJournal }] =
      await Promise.all([
        import('../cluster/session.js'),
        import('../cluster/recover.js'),
        import('../cluster/provider.js'),
        import('../../lib/workspace/resource-journal.js'),
      ]);
    const result = await withDebugLog(this.workspaceDir, 'recover', async (log) =>
      recoverCluster({
        workspaceDir: this.workspaceDir,
        log,
        endpoint: this.flags.endpoint,
        timeoutMs: this.flags.timeout * 1000,
        ...(this.flags.endpoint
          ? {}
          : {
              provider: await workspaceInfrastructure(this.workspaceDir),
              journal: new FileResourceJournal(this.workspaceDir),
            }),
        progress: (line) => {
          if (!this.jsonEnabled()) this.log(line);
        },
      }),
    );
    if (!this.jsonEnabled()) {
      const recovered = result.nodes.filter((n) => n.outcome === 'recovered').length;
      this.log(
        recovered === 0 ? 'No node needed recovery.' : `Recovered ${recovered} node${recovered === 1 ? '' : 's'}.`,
      );
    }
    if (result.nodes.some((n) => n.outcome === 'unreachable')) this.exit(1);
    return result;
  }
}
