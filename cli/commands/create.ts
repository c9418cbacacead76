import { BaseCommand } from '../base-command.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = "Create the cluster's infrastructure (nodes, network, load balancer) with the config's provider.";
  static override description = `Reads constellation-conf.yaml, makes the cluster's uid and init secret, writes them to constellation-state.yaml, then asks the provider to create the node groups. The nodes get only a bcrypt hash of the init secret. When create finishes, the state holds the cluster endpoint; run \`constellation init\` next.

With the local provider, the nodes are processes on this machine (one swtpm, state-disk file and loopback address each), and create writes the measurements of the node image it boots (PCRs 4, 9, 11) into the config.

An interrupted create (Ctrl-C, a killed terminal) continues when run again: the uid and init secret are kept, and the provider continues from what it recorded in constellation-resources.json. \`constellation terminate\` removes whatever was made.`;

  static override examples = [
    { description: 'Create the cluster of the config in the current directory:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'Create the cluster of another workspace:', command: '<%= config.bin %> <%= command.id %> -C ./my-cluster' },
  ];

  static override enableJsonFlag = true;

  public async run(): Promise<{ uid: string; clusterEndpoint: string; resumed: boolean }> {
    const [{ withWorkspaceSession }, { workspaceInfrastructure }, { createCluster }, { runWithSteps, rendererFor }] = await Promise.all([
      import('../../lib/cluster/session.js'),
      import('../../lib/cluster/provider.js'),
      import('../../lib/cluster/create.js'),
      import('../../lib/cluster/reporter.js'),
    ]);
    const result = await withWorkspaceSession(this.workspaceDir, 'create', async ({ workspaceDir, journal, log }) => {
      const provider = await workspaceInfrastructure(workspaceDir);
      return runWithSteps([{ id: 'create', title: `Creating the cluster (${provider.name} provider)` }], rendererFor(process.stdout, this.jsonEnabled()), (report) =>
        createCluster({ workspaceDir, provider, journal, log, progress: (m) => report('create', m) }),
      );
    });
    if (!this.jsonEnabled()) {
      this.log(`${result.resumed ? 'Continued the creation of' : 'Created'} cluster ${result.uid}; endpoint ${result.clusterEndpoint}.`);
      this.log('Next: `constellation init` initializes it.');
    }
    return result;
  }
}
