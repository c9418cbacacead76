import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';

export default class Init extends BaseCommand<typeof Init> {
  static override summary = 'Initialize the created cluster: attest the first node, then send it the master secret.';
  static override description = `Connects to the bootstrapper of the first control-plane node (cluster endpoint, port 9000), verifies its attestation against the config's measurements, and only then sends it the master secret, the init secret and the measurement salt, sealed to the attested node. The node initializes the cluster and starts the join service; the other nodes join by attestation.

Before anything is sent, the master secret is written to constellation-mastersecret.json (an existing one is reused, never overwritten) and the measurement salt to the state, so an interrupted init can simply be run again. On success the state records the cluster ID, and the admin kubeconfig is written to constellation-admin.conf. If the node fails, its log is written to constellation-cluster.log.

If the node's measurements differ from the config, nothing is sent and the error names the PCR, its expected and its actual value.`;

  static override examples = [
    { description: 'Initialize the cluster of the current workspace:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'Print the result as JSON:', command: '<%= config.bin %> <%= command.id %> --json' },
  ];

  static override enableJsonFlag = true;

  static override flags = {
    'merge-kubeconfig': Flags.boolean({
      description:
        "Merge the cluster's admin kubeconfig into yours (KUBECONFIG, else ~/.kube/config) and make its context the current one; other contexts are kept.",
    }),
  };

  public async run(): Promise<{
    clusterId: string;
    kubernetesBackend: string;
    kubeconfigFile: string;
    alreadyInitialized: boolean;
  }> {
    const [{ withWorkspaceSession }, { initCluster }, { runWithSteps, rendererFor }] = await Promise.all([
      import('../cluster/session.js'),
      import('../cluster/init.js'),
      import('../cluster/reporter.js'),
    ]);
    const result = await withWorkspaceSession(this.workspaceDir, 'init', ({ workspaceDir, log }) =>
      runWithSteps(
        [{ id: 'init', title: 'Initializing the cluster' }],
        rendererFor(process.stdout, this.jsonEnabled()),
        (report) => initCluster({ workspaceDir, log, progress: (m) => report('init', m) }),
      ),
    );
    if (!this.jsonEnabled()) {
      for (const warning of result.warnings) this.warn(warning);
      if (result.alreadyInitialized) this.log('The cluster was already initialized; nothing was sent.');
      this.log(`Cluster ID: ${result.clusterId}`);
      if (!result.alreadyInitialized) {
        this.log(
          `Kubernetes backend: ${result.kubernetesBackend}${result.kubernetesBackend === 'none' ? ' (the nodes run attestation, the join service and state disks, but no Kubernetes)' : ''}`,
        );
        if (result.kubeconfigFile) this.log(`Admin kubeconfig: ${result.kubeconfigFile}`);
        if (result.previousKubeconfigFile)
          this.log(`The earlier kubeconfig was moved to ${result.previousKubeconfigFile}.`);
      }
      this.log('Keep constellation-mastersecret.json safe: it is the only way to recover the state disks.');
    }
    if (this.flags['merge-kubeconfig']) {
      const { mergeKubeconfigAndReport } = await import('../cluster/kubeconfig-merge.js');
      await mergeKubeconfigAndReport(
        this.workspaceDir,
        result.kubeconfigFile,
        (line) => !this.jsonEnabled() && this.log(line),
      );
    }
    return {
      clusterId: result.clusterId,
      kubernetesBackend: result.kubernetesBackend,
      kubeconfigFile: result.kubeconfigFile,
      alreadyInitialized: result.alreadyInitialized,
    };
  }
}
