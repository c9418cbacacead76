import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';
import type { UpgradePlan, UpgradeResult } from '../../cluster/upgrade.js';

export default class UpgradeApply extends BaseCommand<typeof UpgradeApply> {
  static override summary =
    'Roll the cluster to the image, measurements and Kubernetes version in the config, one node at a time.';
  static override description = `Before anything else, checks that the config's measurements are exactly the signed measurements of its image (verified with the pinned key: the config's measurementsSigningKey, your local image key, or the release key); a file edited after signing stops it with nothing changed. Then writes the config's measurements to the cluster store as the current ones, while the old ones stay accepted. Then replaces the nodes that do not run what the config asks for, control planes first, one at a time: a new node of the same group boots the new image, joins by attestation, and is verified (attestation and PCR 15) before the old node is removed (a control plane's etcd member leaves the store first, so the quorum never counts a node that is gone). When every node is replaced, the old measurements are no longer accepted.

A new Kubernetes version (within kubeadm's rules: no downgrade, one minor version at a time) goes to the control planes in place before any node is replaced: one runs kubeadm upgrade apply, the others kubeadm upgrade node, and the command waits until every control plane reports it; a control plane that differs only in its Kubernetes version is not replaced, workers take the new version by replacement.

Every step is recorded in constellation-upgrade.json: an interrupted upgrade continues when run again, and never leaves a node removed before its replacement joined. A replacement that fails attestation stops the rollout, naming the node and the PCR; the old node stays and the cluster keeps working. --rollback removes what the upgrade added (and restores the old measurements when no node was replaced yet).

Needs a provider that adds and removes single instances (local, qemu, aws in this build).`;

  static override examples = [
    { description: 'Show what changes, ask, and roll out:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'Without asking:', command: '<%= config.bin %> <%= command.id %> -y' },
    { description: 'Undo an upgrade that stopped:', command: '<%= config.bin %> <%= command.id %> --rollback' },
  ];

  static override flags = {
    yes: Flags.boolean({
      char: 'y',
      description: 'Do not ask before the rollout starts (needed when there is no terminal).',
    }),
    rollback: Flags.boolean({ description: 'Remove what an unfinished upgrade added, instead of continuing it.' }),
    timeout: Flags.integer({ description: 'Seconds to wait for each replacement to join.', default: 120, min: 1 }),
    'kubernetes-timeout': Flags.integer({
      description: 'Seconds to wait for every control plane to run a new Kubernetes version in place.',
      default: 600,
      min: 1,
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<UpgradeResult> {
    const [{ withWorkspaceSession }, { upgradeCluster }, { workspaceInfrastructure }, { confirmOrStop }] =
      await Promise.all([
        import('../../cluster/session.js'),
        import('../../cluster/upgrade.js'),
        import('../../cluster/provider.js'),
        import('../../confirm.js'),
      ]);
    const say = (line: string) => !this.jsonEnabled() && this.log(line);
    const result = await withWorkspaceSession(
      this.workspaceDir,
      'upgrade apply',
      async ({ workspaceDir, journal, log }) =>
        upgradeCluster({
          workspaceDir,
          log,
          journal,
          provider: await workspaceInfrastructure(workspaceDir),
          rollback: this.flags.rollback,
          joinTimeoutMs: this.flags.timeout * 1000,
          kubernetesTimeoutMs: this.flags['kubernetes-timeout'] * 1000,
          progress: say,
          confirm: async (plan: UpgradePlan) => {
            for (const line of describePlan(plan)) say(line);
            await confirmOrStop(
              'Start the rollout?',
              { yes: this.flags.yes },
              'The rollout did not start; no node was replaced.',
            );
            return true;
          },
        }),
    );
    if (result.upToDate) say('Every node runs what the config asks for: nothing to upgrade.');
    else if (result.rolledBack)
      say(
        `Rolled back: removed ${result.rolledBack.length} node${result.rolledBack.length === 1 ? '' : 's'} the upgrade had added.`,
      );
    else if (result.replaced.length > 0)
      say(`Upgraded: ${result.replaced.map((r) => `${r.old} → ${r.new}`).join(', ')}.`);
    return result;
  }
}

function describePlan(plan: UpgradePlan): string[] {
  const t = plan.target;
  return [
    `Target: image ${t.image} (measurements ${t.measurementsDigest}), Kubernetes ${t.kubernetesVersion}, microservices ${t.microserviceVersion}.`,
    `Nodes to replace, one at a time (${plan.replace.length}):`,
    ...plan.replace.map(
      (n) =>
        `  ${n.name} (${n.role}): runs ${n.runs ? `${n.runs.image}@${n.runs.measurementsDigest}, Kubernetes ${n.runs.kubernetesVersion || '-'}` : 'unknown'}`,
    ),
  ];
}
