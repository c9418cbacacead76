import { Flags } from '@oclif/core';
import { promises as fs } from 'node:fs';
import { BaseCommand } from '../../base-command.js';

export default class MiniUp extends BaseCommand<typeof MiniUp> {
  static override summary = 'Create and initialize a whole cluster on this machine with the local provider.';
  static override description = `One command for config generate local, create, init, and waiting until every node has joined. Each node is a set of processes on this machine with its own software TPM (swtpm), encrypted state directory (gocryptfs) and network namespace (an address no other local user can take; this needs root); a metadata server and a load balancer play the cloud. The nodes run the bootstrapper built in dist/ (npm run build).

The workspace gets the usual files: constellation-conf.yaml, constellation-state.yaml, constellation-mastersecret.json, constellation-admin.conf, and the node folders under constellation-local/.

If mini up is interrupted at any point, run it again in the same workspace: it continues where it stopped (it never makes a second master secret). \`constellation mini down\` removes the cluster and the files.`;

  static override examples = [
    {
      description: 'A cluster of 1 control-plane node and 1 worker in the current directory:',
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description: '1 control-plane node and 2 workers in a new directory:',
      command: '<%= config.bin %> <%= command.id %> -w 2 -C ./mini',
    },
    {
      description: 'A cluster on local image v1 (made by `mini image create v1`):',
      command: '<%= config.bin %> <%= command.id %> --image v1 -C ./mini',
    },
    {
      description: 'A cluster of QEMU VMs that boot the node image (built first when needed):',
      command: '<%= config.bin %> <%= command.id %> --vm -C ./mini-vm',
    },
  ];

  static override flags = {
    'control-plane-nodes': Flags.integer({
      char: 'c',
      description: 'Number of control-plane nodes (default 1; a continued run keeps its earlier count).',
      min: 1,
      max: 90,
    }),
    'worker-nodes': Flags.integer({
      char: 'w',
      description: 'Number of worker nodes (default 1; a continued run keeps its earlier count).',
      min: 0,
      max: 150,
    }),
    image: Flags.string({
      description:
        'The image the nodes boot: `local` (the current build, default) or a version made by `mini image create` (its signed measurements are verified first); with --vm a qemu image folder or a version of your qemu image store.',
      helpValue: '<version>',
    }),
    vm: Flags.boolean({
      description:
        'Run every node as a QEMU VM that boots the node image under UEFI firmware (the qemu provider): real measured boot, real dm-crypt, minutes instead of seconds. Without --image, the image of this installation is built into your qemu image store first (once per build).',
    }),
    yes: Flags.boolean({
      char: 'y',
      description: 'Do not ask before continuing a cluster an earlier mini up left in the workspace.',
    }),
    'merge-kubeconfig': Flags.boolean({
      description:
        "Merge the cluster's admin kubeconfig into yours (KUBECONFIG, else ~/.kube/config) and make its context the current one; other contexts are kept.",
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    clusterId: string;
    kubeconfigFile: string;
    nodes: { name: string; role: string; address: string; state: string }[];
  }> {
    const [
      { confirmIfInteractiveOrStop },
      { withWorkspaceSession },
      { checkMiniUpPreconditions, miniUp },
      { runWithSteps, rendererFor },
      { workspaceArg },
      { CONFIG_FILE, pathExists },
    ] = await Promise.all([
      import('../../confirm.js'),
      import('../../cluster/session.js'),
      import('../../cluster/mini.js'),
      import('../../cluster/reporter.js'),
      import('../../cluster/next-steps.js'),
      import('../../../lib/workspace/files.js'),
    ]);
    await checkMiniUpPreconditions(this.workspaceDir, { vm: this.flags.vm }); // before anything is made, the workspace folder included
    await fs.mkdir(this.workspaceDir, { recursive: true });
    if (await pathExists(`${this.workspaceDir}/${CONFIG_FILE}`)) {
      await confirmIfInteractiveOrStop(
        `${this.workspaceDir} holds a cluster config from an earlier run. Continue that cluster?`,
        { yes: this.flags.yes },
        'Nothing was changed. `constellation mini down` removes the earlier cluster; or use another directory (-C <dir>).',
      );
    }
    const steps = [
      { id: 'config', title: 'Writing the config' },
      { id: 'create', title: this.flags.vm ? 'Creating the VM nodes' : 'Creating the local nodes' },
      { id: 'init', title: 'Initializing the cluster' },
      { id: 'join', title: 'Waiting for every node to join' },
    ] as const;
    const result = await withWorkspaceSession(this.workspaceDir, 'mini up', ({ workspaceDir, journal, log }) =>
      runWithSteps(steps, rendererFor(process.stdout, this.jsonEnabled()), (report) =>
        miniUp({
          workspaceDir,
          journal,
          log,
          controlPlanes: this.flags['control-plane-nodes'],
          workers: this.flags['worker-nodes'],
          image: this.flags.image,
          vm: this.flags.vm,
          progress: report,
        }),
      ),
    );
    if (!this.jsonEnabled()) {
      this.log(
        `Cluster ${result.clusterId} is up: ${result.nodes.length} nodes joined (${result.nodes.map((n) => n.name).join(', ')}).`,
      );
      if (result.kubernetesBackend === 'none') {
        this.log(
          'Kubernetes backend: none: the nodes run attestation, the join service and encrypted state disks, but no Kubernetes.',
        );
      }
      if (result.kubeconfigFile) this.log(`Admin kubeconfig: ${result.kubeconfigFile}`);
      const ws = workspaceArg(this.workspaceDir);
      this.log(`\`constellation status${ws}\` shows the nodes; \`constellation mini down${ws}\` removes the cluster.`);
    }
    if (this.flags['merge-kubeconfig']) {
      const { mergeKubeconfigAndReport } = await import('../../cluster/kubeconfig-merge.js');
      await mergeKubeconfigAndReport(
        this.workspaceDir,
        result.kubeconfigFile,
        (line) => !this.jsonEnabled() && this.log(line),
      );
    }
    return { clusterId: result.clusterId, kubeconfigFile: result.kubeconfigFile, nodes: result.nodes };
  }
}
