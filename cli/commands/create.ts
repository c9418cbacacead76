import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary =
    "Create the cluster's infrastructure (nodes, network, load balancer) with the config's provider.";
  static override description = `Reads constellation-conf.yaml, makes the cluster's uid and init secret, writes them to constellation-state.yaml, then asks the provider to create the node groups. The nodes get only a bcrypt hash of the init secret. When create finishes, the state holds the cluster endpoint; run \`constellation init\` next.

With the local provider, the nodes are processes on this machine (one swtpm, encrypted state directory and network namespace with its own address each; this needs root), and create writes the measurements of the node image it boots (PCRs 4, 9, 11) into the config.

An interrupted create (Ctrl-C, a killed terminal) continues when run again: the uid and init secret are kept, and the provider continues from what it recorded in constellation-resources.json.

Before it starts, create shows what it will make (each node group's count, instance type, zone and state disk; the network and load balancer; image, attestation variant, Kubernetes version) and, on a terminal, asks; -y does not ask. It names no prices.

When the cloud refuses a step (a quota, a missing permission), create shows the cloud's message and offers to roll back, that is to delete what it created so far: on a terminal it asks (default yes); -y rolls back without asking; without a terminal and without -y nothing is deleted, and create names the two ways on: \`constellation create\` again continues, \`constellation terminate\` deletes. Either way create exits with an error.`;

  static override examples = [
    {
      description: 'Create the cluster of the config in the current directory:',
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description: 'Create the cluster of another workspace:',
      command: '<%= config.bin %> <%= command.id %> -C ./my-cluster',
    },
    {
      description: 'In a script: if the cloud refuses a step, delete what was made without asking:',
      command: '<%= config.bin %> <%= command.id %> -y',
    },
  ];

  static override flags = {
    yes: Flags.boolean({
      char: 'y',
      description:
        'Do not ask: create what the config says, and if create fails half-way, roll back (delete what it made so far).',
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{ uid: string; clusterEndpoint: string; resumed: boolean }> {
    const [
      { withWorkspaceSession },
      { workspaceInfrastructure },
      { createClusterWithRollBack },
      { runWithSteps, rendererFor },
    ] = await Promise.all([
      import('../cluster/session.js'),
      import('../cluster/provider.js'),
      import('../cluster/create.js'),
      import('../cluster/reporter.js'),
    ]);
    const json = this.jsonEnabled();
    const renderer = rendererFor(process.stdout, json);
    if (!json) {
      // What will be made, and a question at a terminal (scripts and -y go ahead, as before).
      const [{ loadConfig }, { describeCreatePlan }, { confirmIfInteractiveOrStop }] = await Promise.all([
        import('../../lib/config/index.js'),
        import('../cluster/create-plan.js'),
        import('../confirm.js'),
      ]);
      for (const line of describeCreatePlan(await loadConfig(this.workspaceDir))) this.log(line);
      await confirmIfInteractiveOrStop('Create this cluster?', { yes: this.flags.yes }, 'Nothing was created.');
    }
    const result = await withWorkspaceSession(this.workspaceDir, 'create', async ({ workspaceDir, journal, log }) =>
      createClusterWithRollBack({
        workspaceDir,
        provider: await workspaceInfrastructure(workspaceDir),
        journal,
        log,
        // Under --json nobody is asked, and only the JSON result or error is printed.
        rollBack: {
          yes: this.flags.yes,
          ...(json ? { interactive: false } : {}),
          say: (line) => {
            if (!json) this.log(line);
          },
        },
        runStep: (title, fn) =>
          runWithSteps([{ id: 'step', title }], renderer, (report) => fn((message) => report('step', message))),
      }),
    );
    if (!json) {
      this.log(
        `${result.resumed ? 'Continued the creation of' : 'Created'} cluster ${result.uid}; endpoint ${result.clusterEndpoint}.`,
      );
      this.log('Next: `constellation init` initializes it.');
    }
    return result;
  }
}
