import { BaseCommand } from '../base-command.js';
import type { ClusterStatus } from '../cluster/status.js';

export default class Status extends BaseCommand<typeof Status> {
  static override summary = "Show every node of the cluster: role, address, and whether it has joined.";
  static override description = `Lists the provider's instances and asks each node's bootstrapper (port 30081) what it is doing. States: joined (part of the cluster; the node that was initialized counts as joined), joining, waiting (not yet initialized or joined), refused (the join service rejected its attestation; the reason names the PCR), failed, unreachable (its bootstrapper does not answer) and stopped (the instance does not run).

Takes no lock and changes nothing, so it can run while another command works in the workspace.`;

  static override examples = [
    { description: 'Show the nodes of the cluster in the current workspace:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'As JSON ({"nodes": [{"name", "role", "address", "state", "reason"?}]}):', command: '<%= config.bin %> <%= command.id %> --json' },
  ];

  static override enableJsonFlag = true;

  public async run(): Promise<ClusterStatus> {
    const [{ withDebugLog }, { workspaceInfrastructure }, { clusterStatus, summarizeStatus }, { readStateOrEmpty }, { FileResourceJournal }] = await Promise.all([
      import('../cluster/session.js'),
      import('../cluster/provider.js'),
      import('../cluster/status.js'),
      import('../../lib/workspace/state.js'),
      import('../../lib/workspace/resource-journal.js'),
    ]);
    const status = await withDebugLog(this.workspaceDir, 'status', async (log) => {
      const provider = await workspaceInfrastructure(this.workspaceDir);
      const state = await readStateOrEmpty(this.workspaceDir);
      return clusterStatus({
        workspaceDir: this.workspaceDir,
        provider,
        journal: new FileResourceJournal(this.workspaceDir),
        log,
        clusterId: state.clusterValues.clusterID || undefined,
      });
    });
    if (!this.jsonEnabled()) {
      if (status.nodes.length === 0) {
        this.log('The workspace has no nodes. `constellation create` (or `constellation mini up`) makes some.');
        return status;
      }
      const rows = [['NAME', 'ROLE', 'ADDRESS', 'STATE', 'REASON'], ...status.nodes.map((n) => [n.name, n.role, n.address, n.state, n.reason ?? ''])];
      const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
      for (const row of rows) this.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd());
      this.log('');
      this.log(`${summarizeStatus(status)}.`);
    }
    return status;
  }
}
