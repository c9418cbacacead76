/**
 * `status`: every node the provider lists, with what its bootstrapper says about itself (GetStatus on the verify
 * service, port 30081: plain TLS, no attestation, no secret). A node is `joined` once it belongs to the cluster
 * (the node that was initialized counts as joined); `refused` carries the join service's reason (it names the PCR);
 * a node whose bootstrapper does not answer is `unreachable`, one whose instance does not run is `stopped`.
 */
import type { Instance, InfrastructureProvider, ResourceJournal } from '../../providers/contract.js';
import type { NodeStatus } from '../../proto/gen/constellation/verify.js';
import type { Logger } from '../../lib/logging/index.js';
import { clusterJournalView } from '../iam/journal-view.js';

export const VERIFY_PORT = 30081;

export type NodeState = 'joined' | 'joining' | 'waiting' | 'refused' | 'failed' | 'unreachable' | 'stopped';

export interface NodeStatusEntry {
  name: string;
  role: string;
  address: string;
  state: NodeState;
  /** Why a node is refused, failed, unreachable or stopped. */
  reason?: string;
}

export interface ClusterStatus {
  nodes: NodeStatusEntry[];
}

export interface StatusOptions {
  workspaceDir: string;
  provider: InfrastructureProvider;
  journal: ResourceJournal;
  log: Logger;
  /** The cluster's ID (hex) once initialized: a node that reports another one is not part of this cluster. */
  clusterId?: string;
  port?: number;
  /** Longest wait for one node's answer. */
  timeoutMs?: number;
}

export async function clusterStatus(options: StatusOptions): Promise<ClusterStatus> {
  const instances = await options.provider.listInstances({ journal: clusterJournalView(options.journal), log: options.log, workspaceDir: options.workspaceDir });
  const nodes = await Promise.all(instances.map((instance) => nodeStatus(instance, options)));
  return { nodes };
}

/** How many nodes are in each state, e.g. "2 of 3 nodes joined; 1 refused". */
export function summarizeStatus(status: ClusterStatus): string {
  const joined = status.nodes.filter((n) => n.state === 'joined').length;
  const others = new Map<string, number>();
  for (const n of status.nodes) if (n.state !== 'joined') others.set(n.state, (others.get(n.state) ?? 0) + 1);
  const rest = [...others].map(([state, count]) => `${count} ${state}`).join(', ');
  return `${joined} of ${status.nodes.length} node${status.nodes.length === 1 ? '' : 's'} joined${rest ? `; ${rest}` : ''}`;
}

async function nodeStatus(instance: Instance, options: StatusOptions): Promise<NodeStatusEntry> {
  const address = instance.publicIp || instance.privateIp;
  const base = { name: instance.name, role: instance.role, address };
  if (instance.state !== 'running') {
    return { ...base, state: instance.state === 'pending' ? 'waiting' : 'stopped', reason: `the instance is ${instance.state}` };
  }
  if (!address) return { ...base, state: 'waiting', reason: 'the instance has no address yet' };
  let answer: NodeStatus;
  try {
    answer = await getNodeStatus(`${address}:${options.port ?? VERIFY_PORT}`, options.timeoutMs ?? 3000);
  } catch (err) {
    const reason = (err as { details?: string }).details || (err as Error).message;
    options.log.debug('node did not answer GetStatus', { node: instance.name, reason });
    return { ...base, state: 'unreachable', reason: `its bootstrapper does not answer: ${reason}` };
  }
  if (options.clusterId && answer.clusterId && answer.clusterId.toLowerCase() !== options.clusterId.toLowerCase()) {
    return { ...base, state: 'failed', reason: `it belongs to another cluster (cluster ID ${answer.clusterId})` };
  }
  return { ...base, ...mapState(answer) };
}

function mapState(answer: NodeStatus): { state: NodeState; reason?: string } {
  const reason = answer.reason || undefined;
  switch (answer.state) {
    case 'initialized':
    case 'joined':
      return { state: 'joined' };
    case 'initializing':
    case 'joining':
      return { state: 'joining', reason };
    case 'waiting':
      return { state: 'waiting', reason };
    case 'refused':
      return { state: 'refused', reason: reason ?? 'the join service refused it' };
    case 'failed':
      return { state: 'failed', reason: reason ?? 'the bootstrapper failed' };
    default:
      return { state: 'failed', reason: `the bootstrapper reports an unknown state "${answer.state}"` };
  }
}

/** One GetStatus call (plain TLS with the node's self-signed certificate: nothing secret crosses it). */
export async function getNodeStatus(address: string, timeoutMs: number): Promise<NodeStatus> {
  const [{ VerifyClient }, { Metadata }, { createAttestedClientCredentials, attestedChannelOptions }] = await Promise.all([
    import('../../proto/gen/constellation/verify.js'),
    import('@grpc/grpc-js'),
    import('../../lib/atls/credentials.js'),
  ]);
  const client = new VerifyClient(address, await createAttestedClientCredentials(), attestedChannelOptions);
  try {
    return await new Promise<NodeStatus>((resolve, reject) => {
      client.getStatus({}, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res)));
    });
  } finally {
    client.close();
  }
}
