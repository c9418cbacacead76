import { BaseCommand } from '../base-command.js';
import type { ClusterStatus, NodeStatusEntry } from '../cluster/status.js';

export default class Status extends BaseCommand<typeof Status> {
  static override summary =
    'Show every node of the cluster: its state, what it runs, and whether that is what the config asks for.';
  static override description = `Lists the provider's instances and asks each node's bootstrapper (port 30081) what it is doing and what it runs. States: joined (part of the cluster; the node that was initialized counts as joined), joining, waiting (not yet initialized or joined), awaiting-recovery (a control-plane node back from a reboot that no join service answers: run \`constellation recover\`), refused (the join service rejected its attestation; the reason names the PCR), failed, unreachable (its bootstrapper does not answer) and stopped (the instance does not run).

Per node it shows the image (version and a short digest of the image's measurements as the node booted), the Kubernetes version, whether the node is up to date with the config (image, measurements, Kubernetes and microservice versions, attestation variant), and the last attestation decision about it (by the CLI at init or recover, or by a join service). What a node reports about itself is informational; \`constellation verify\` proves it by attestation.

Takes no lock and changes nothing, so it can run while another command works in the workspace.`;

  static override examples = [
    {
      description: 'Show the nodes of the cluster in the current workspace:',
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description:
        'As JSON ({"expected": {...}, "cliVersion", "nodes": [{"name", "role", "address", "state", "reason"?, "software"?, "upToDate"?, "outdated"?, "lastAttestation"?}]}):',
      command: '<%= config.bin %> <%= command.id %> --json',
    },
  ];

  static override enableJsonFlag = true;

  public async run(): Promise<ClusterStatus> {
    const [
      { withDebugLog },
      { workspaceInfrastructure },
      { clusterStatus, expectedForStatus },
      { readStateOrEmpty },
      { FileResourceJournal },
      { loadConfig },
      { cliVersion },
    ] = await Promise.all([
      import('../cluster/session.js'),
      import('../cluster/provider.js'),
      import('../cluster/status.js'),
      import('../../lib/workspace/state.js'),
      import('../../lib/workspace/resource-journal.js'),
      import('../../lib/config/index.js'),
      import('../../lib/config/package-info.js'),
    ]);
    const status = await withDebugLog(this.workspaceDir, 'status', async (log) => {
      const provider = await workspaceInfrastructure(this.workspaceDir);
      const [state, config] = await Promise.all([readStateOrEmpty(this.workspaceDir), loadConfig(this.workspaceDir)]);
      return clusterStatus({
        workspaceDir: this.workspaceDir,
        provider,
        journal: new FileResourceJournal(this.workspaceDir),
        log,
        clusterId: state.clusterValues.clusterID || undefined,
        expected: await expectedForStatus(config, this.workspaceDir),
        cliVersion: cliVersion(),
      });
    });
    if (!this.jsonEnabled()) this.render(status, await import('../cluster/status.js'));
    return status;
  }

  private render(
    status: ClusterStatus,
    { summarizeStatus: summarize, describeStore, describeTrust }: typeof import('../cluster/status.js'),
  ): void {
    if (status.nodes.length === 0) {
      this.log('The workspace has no nodes. `constellation create` (or `constellation mini up`) makes some.');
      return;
    }
    const e = status.expected;
    if (e) {
      this.log(
        `Config: image ${e.image}${e.imageVersion ? ` (version ${e.imageVersion})` : ''} (measurements ${e.measurementsDigest || 'unknown'}), Kubernetes ${e.kubernetesVersion || 'none (kubernetesBackend: none)'}, microservices ${e.microserviceVersion}, attestation ${e.attestationVariant}; CLI v${status.cliVersion}`,
      );
      this.log('');
    }
    const rows = [
      ['NAME', 'ROLE', 'ADDRESS', 'STATE', 'IMAGE', 'KUBERNETES', 'UP TO DATE', 'LAST ATTESTATION'],
      ...status.nodes.map((n) => [
        n.name,
        n.role,
        n.address,
        n.state,
        n.software ? `${n.software.image}@${n.software.measurementsDigest || '?'}` : '-',
        n.software?.kubernetesVersion || '-',
        n.upToDate === undefined ? '-' : n.upToDate ? 'yes' : 'no',
        lastAttestation(n),
      ]),
    ];
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    for (const row of rows)
      this.log(
        row
          .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i])))
          .join('  ')
          .trimEnd(),
      );
    const notes = status.nodes.flatMap((n) => [
      ...(n.reason ? [`${n.name}: ${n.reason}`] : []),
      ...(n.outdated ?? []).map((o) => `${n.name}: not up to date: ${o}`),
    ]);
    if (notes.length > 0) {
      this.log('');
      for (const note of notes) this.log(note);
    }
    if (status.store) {
      this.log('');
      this.log(`Cluster store (${status.store.backend}): ${describeStore(status.store)}`);
      for (const m of status.store.members) {
        this.log(
          `  ${m.name || '(not started)'}  ${m.clientUrls[0] ?? m.peerUrls[0] ?? ''}  ${m.isLearner ? 'learner' : 'voter'}${m.leader ? ', leader' : ''}  ${m.healthy ? 'healthy' : `unhealthy${m.reason ? `: ${m.reason}` : ''}`}`,
        );
      }
    }
    if (status.trusted && e) this.log(`Measurements: ${describeTrust(status.trusted, e)}.`);
    this.log('');
    this.log(`${summarize(status)}.`);
  }
}

/** "accepted (join service, 5s ago)"; "-" before any decision. */
function lastAttestation(node: NodeStatusEntry): string {
  const a = node.lastAttestation;
  if (!a) return '-';
  const by = a.verifier.startsWith('the join service')
    ? 'join service'
    : a.verifier.replace(/^the CLI \((\w+)\)$/, '$1');
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(a.time)) / 1000));
  const ago = Number.isNaN(seconds)
    ? ''
    : seconds < 120
      ? `, ${seconds}s ago`
      : seconds < 7200
        ? `, ${Math.round(seconds / 60)}m ago`
        : `, ${Math.round(seconds / 3600)}h ago`;
  return `${a.result} (${by}${ago})`;
}
