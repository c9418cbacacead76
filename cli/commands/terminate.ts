import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';

export default class Terminate extends BaseCommand<typeof Terminate> {
  static override summary = 'Delete the cluster: everything its provider made. The master secret stays.';
  static override description = `Deletes everything the provider recorded for this workspace (local provider: every node process, swtpm, state disk and node folder, the metadata server and load balancer; cloud providers: instances, networks, load balancers), resets constellation-state.yaml to empty and removes constellation-admin.conf. constellation-mastersecret.json and the config stay.

Works after any interruption, also of create or of an earlier terminate: run it again until it succeeds. Refuses a folder without a cluster. Asks for confirmation unless -y is given; without a terminal, -y is required; declined, it exits with code 1 and changes nothing. Removes the cluster's context from your kubeconfig if --merge-kubeconfig put it there.

With --by-tag (cloud providers), it also deletes every resource that carries the cluster's constellation-uid tag (GCP: label, or the cluster's name prefix) but is not recorded in constellation-resources.json, e.g. one the cloud accepted just before create was killed.`;

  static override examples = [
    {
      description: 'Terminate the cluster of the current workspace (asks first):',
      command: '<%= config.bin %> <%= command.id %>',
    },
    { description: 'In a script, without asking:', command: '<%= config.bin %> <%= command.id %> -y -C ./my-cluster' },
    {
      description: "After a crash, also delete what carries the cluster's tag but was never recorded:",
      command: '<%= config.bin %> <%= command.id %> --by-tag',
    },
  ];

  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Do not ask for confirmation (needed when there is no terminal).' }),
    'by-tag': Flags.boolean({
      description:
        "Also delete unrecorded resources tagged with the cluster's constellation-uid (cloud providers only).",
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{ provider: string | null; removedFiles: string[] }> {
    const [
      { confirmOrStop },
      { withWorkspaceSession },
      { checkSomethingToTerminate, checkTerminateByTag, terminateCluster },
      { runWithSteps, rendererFor },
    ] = await Promise.all([
      import('../confirm.js'),
      import('../cluster/session.js'),
      import('../cluster/terminate.js'),
      import('../cluster/reporter.js'),
    ]);
    const byTag = this.flags['by-tag'];
    // --by-tag's own refusals first: they say more (a provider without tags) than "no cluster".
    if (byTag) await checkTerminateByTag(this.workspaceDir);
    await checkSomethingToTerminate(this.workspaceDir);
    const what = byTag
      ? "Everything its provider made, and everything tagged with the cluster's uid, is deleted"
      : 'Everything its provider made is deleted';
    const question = `Terminate the cluster in ${this.workspaceDir}? ${what} (the master secret stays).`;
    await confirmOrStop(question, { yes: this.flags.yes }, 'Nothing was terminated.');
    const result = await withWorkspaceSession(this.workspaceDir, 'terminate', ({ workspaceDir, journal, log }) =>
      runWithSteps(
        [{ id: 'terminate', title: 'Terminating the cluster' }],
        rendererFor(process.stdout, this.jsonEnabled()),
        (report) => terminateCluster({ workspaceDir, journal, log, byTag, progress: (m) => report('terminate', m) }),
      ),
    );
    if (!this.jsonEnabled()) {
      this.log(
        result.provider
          ? `Terminated the ${result.provider} cluster.`
          : 'The workspace had no cluster; nothing to terminate.',
      );
      if (result.masterSecretKept) this.log('The master secret (constellation-mastersecret.json) was kept.');
    }
    return { provider: result.provider ?? null, removedFiles: result.removedFiles };
  }
}
