import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';
import type { ApplyPhase, ApplyResult } from '../cluster/apply.js';

const PHASES = ['infrastructure', 'init', 'attestationconfig', 'image', 'k8s'] as const;

export default class Apply extends BaseCommand<typeof Apply> {
  static override summary =
    'Bring the cluster to what the config says: create, initialize, scale and upgrade as needed.';
  static override description = `Runs the phases that are needed, each checking what the workspace and the cluster already are, so apply can be run again at any time:

  infrastructure     no cluster yet: create it; else scale every node group to its initialCount (new nodes join by attestation; removal takes the newest nodes first; a control plane's etcd member leaves the cluster store first)
  init               not initialized yet: initialize (as \`constellation init\`)
  image, k8s         replace the nodes that do not run the config's image, measurements or Kubernetes version, one at a time (as \`constellation upgrade apply\`)
  attestationconfig  with image and k8s skipped: write the config's measurements to the cluster store only

--skip-phases leaves phases out (as upstream Constellation). \`create\` and \`init\` remain for doing one step at a time. Scale-in removes exactly the nodes it chose (the newest), never ones the cloud picks.`;

  static override examples = [
    { description: 'Create, initialize and wait for every node:', command: '<%= config.bin %> <%= command.id %> -y' },
    {
      description: 'After raising nodeGroups.worker_default.initialCount, add the workers:',
      command: '<%= config.bin %> <%= command.id %> --skip-phases image,k8s',
    },
  ];

  static override flags = {
    yes: Flags.boolean({
      char: 'y',
      description: 'Do not ask before an upgrade rollout (needed when there is no terminal).',
    }),
    'merge-kubeconfig': Flags.boolean({
      description:
        "Merge the cluster's admin kubeconfig into yours (KUBECONFIG, else ~/.kube/config) and make its context the current one; other contexts are kept. Nothing is merged where the cluster runs no Kubernetes.",
    }),
    'skip-phases': Flags.string({
      description: `Comma-separated phases to leave out: ${PHASES.join(', ')}.`,
      helpValue: '<phase,...>',
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<ApplyResult> {
    const { UserError } = await import('../../lib/errors.js');
    const skip = new Set<ApplyPhase>();
    for (const phase of (this.flags['skip-phases'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      if (!(PHASES as readonly string[]).includes(phase))
        throw new UserError(`"${phase}" is not a phase of apply.`, { hint: `The phases: ${PHASES.join(', ')}.` });
      skip.add(phase as ApplyPhase);
    }
    const [{ withWorkspaceSession }, { applyConfig }, { workspaceInfrastructure }, { confirmOrStop }] =
      await Promise.all([
        import('../cluster/session.js'),
        import('../cluster/apply.js'),
        import('../cluster/provider.js'),
        import('../confirm.js'),
      ]);
    const say = (line: string) => !this.jsonEnabled() && this.log(line);
    const result = await withWorkspaceSession(this.workspaceDir, 'apply', async ({ workspaceDir, journal, log }) =>
      applyConfig({
        workspaceDir,
        log,
        journal,
        provider: await workspaceInfrastructure(workspaceDir),
        skip,
        progress: say,
        confirmUpgrade: async (plan) => {
          say(
            `Upgrade: ${plan.replace.length} node(s) to replace, one at a time: ${plan.replace.map((n) => n.name).join(', ')}.`,
          );
          await confirmOrStop(
            'Start the rollout?',
            { yes: this.flags.yes },
            'The rollout did not start; no node was replaced.',
          );
          return true;
        },
      }),
    );
    const scaled = Object.entries(result.scaled).map(([group, [from, to]]) => `${group} ${from} → ${to}`);
    const summary = [
      result.created ? 'created the cluster' : undefined,
      result.initialized ? 'initialized it' : undefined,
      scaled.length > 0 ? `scaled ${scaled.join(', ')}` : undefined,
      result.upgrade && result.upgrade.replaced.length > 0
        ? `replaced ${result.upgrade.replaced.length} node(s)`
        : undefined,
      result.measurementsWritten ? 'wrote the measurements to the cluster store' : undefined,
    ]
      .filter(Boolean)
      .join('; ');
    say(
      summary
        ? `${summary.charAt(0).toUpperCase()}${summary.slice(1)}.`
        : 'The cluster already is what the config says.',
    );
    if (this.flags['merge-kubeconfig']) {
      // As upstream's apply: after init, or for a cluster initialized before (its admin kubeconfig in the workspace).
      const [{ mergeKubeconfigAndReport }, { pathExists, ADMIN_CONF_FILE }, path] = await Promise.all([
        import('../cluster/kubeconfig-merge.js'),
        import('../../lib/workspace/files.js'),
        import('node:path'),
      ]);
      const existing = path.join(this.workspaceDir, ADMIN_CONF_FILE);
      const file = result.kubeconfigFile || ((await pathExists(existing)) ? existing : '');
      await mergeKubeconfigAndReport(this.workspaceDir, file, say);
    }
    return result;
  }
}
