import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';
import type { VerifyResult } from '../cluster/verify.js';

/** Exit code when a node is refused (1 stays "could not verify": unreachable, bad input). */
const EXIT_REFUSED = 3;

export default class Verify extends BaseCommand<typeof Verify> {
  static override summary = 'Prove by attestation that a node runs the expected software and belongs to this cluster.';
  static override description = `Sends a fresh nonce to a node's verify service (port 30081), validates the attestation document it answers with against the measurements in the config, and checks that PCR 15 holds the value this cluster's ID gives (every node extends PCR 15 with the cluster ID when it is initialized or joins). No secret is sent.

By default the node behind the cluster endpoint answers; -e names one node, --all verifies every node the provider lists, concurrently, one row each.

Exit codes: 0 every node verified, ${EXIT_REFUSED} a node was refused (the row names the PCR with its expected and actual value, or says the node belongs to another cluster), 1 a node could not be asked.`;

  static override examples = [
    { description: 'Verify the node behind the cluster endpoint:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'Verify every node of the cluster:', command: '<%= config.bin %> <%= command.id %> --all' },
    {
      description: 'Verify one node against a cluster ID from elsewhere:',
      command: '<%= config.bin %> <%= command.id %> -e 10.213.4.100 --cluster-id 2b7c…',
    },
    {
      description: 'Print the attestation documents as the nodes sent them:',
      command: '<%= config.bin %> <%= command.id %> --all -o raw',
    },
    {
      description: "Save one node's document and check it again offline, with the PCR table:",
      command:
        '<%= config.bin %> <%= command.id %> -e 10.213.4.100 -o raw > node.json && <%= config.bin %> attestation verify node.json',
    },
  ];

  static override flags = {
    'node-endpoint': Flags.string({
      char: 'e',
      description: "A node's verify service, HOST[:PORT] (port default 30081). Default: the cluster endpoint.",
      helpValue: 'HOST[:PORT]',
      exclusive: ['all'],
    }),
    'cluster-id': Flags.string({
      description: "The cluster ID (hex) the node must belong to. Default: the state file's.",
      helpValue: 'ID',
    }),
    all: Flags.boolean({ description: 'Verify every node the provider lists, concurrently.' }),
    output: Flags.string({
      char: 'o',
      description:
        'table (default), json (one object with every node), or raw (the attestation documents, one per line, each with the nonce it was made for: `attestation verify` takes the saved line).',
      options: ['table', 'json', 'raw'],
      default: 'table',
    }),
  };

  public async run(): Promise<VerifyResult> {
    const [{ withDebugLog }, { verifyCluster }, { workspaceInfrastructure }, { FileResourceJournal }] =
      await Promise.all([
        import('../cluster/session.js'),
        import('../cluster/verify.js'),
        import('../cluster/provider.js'),
        import('../../lib/workspace/resource-journal.js'),
      ]);
    const result = await withDebugLog(this.workspaceDir, 'verify', async (log) =>
      verifyCluster({
        workspaceDir: this.workspaceDir,
        log,
        nodeEndpoint: this.flags['node-endpoint'],
        clusterId: this.flags['cluster-id'],
        all: this.flags.all,
        ...(this.flags.all
          ? {
              provider: await workspaceInfrastructure(this.workspaceDir),
              journal: new FileResourceJournal(this.workspaceDir),
            }
          : {}),
      }),
    );
    this.render(result);
    if (result.nodes.some((n) => n.outcome === 'refused')) this.exit(EXIT_REFUSED);
    if (result.nodes.some((n) => n.outcome === 'unreachable')) this.exit(1);
    return result;
  }

  private render(result: VerifyResult): void {
    const output = this.flags.output;
    if (output === 'raw') {
      // One document per line, with the nonce it was made for: `attestation verify <file>` takes it from there.
      for (const n of result.nodes) if (n.document) this.log(JSON.stringify({ ...n.document, nonce: n.nonce }));
      return;
    }
    if (output === 'json') {
      this.log(
        JSON.stringify(
          {
            clusterId: result.clusterId,
            variant: result.variant,
            nodes: result.nodes.map(({ document: _d, nonce: _n, ...n }) => n),
          },
          null,
          2,
        ),
      );
      return;
    }
    const rows = [
      ['NODE', 'ADDRESS', 'RESULT'],
      ...result.nodes.map((n) => [n.node, n.address, n.outcome.toUpperCase()]),
    ];
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    for (const row of rows)
      this.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
    const notes = result.nodes.flatMap((n) => [
      ...(n.reason ? [`${n.node}: ${n.reason}`] : []),
      ...n.warnings.map((w) => `${n.node}: warning: ${w}`),
    ]);
    if (notes.length > 0) this.log(`\n${notes.join('\n')}`);
    const verified = result.nodes.filter((n) => n.outcome === 'verified').length;
    this.log(
      `\n${verified} of ${result.nodes.length} node${result.nodes.length === 1 ? '' : 's'} verified for cluster ID ${result.clusterId} (${result.variant}).`,
    );
  }
}
