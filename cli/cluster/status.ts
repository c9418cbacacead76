/**
 * `status`: every node the provider lists, with what its bootstrapper says about itself (GetStatus on the verify
 * service, port 30081: plain TLS, no attestation, no secret). A node is `joined` once it belongs to the cluster
 * (the node that was initialized counts as joined); `refused` carries the join service's reason (it names the PCR);
 * `awaiting-recovery` is a rebooted control plane that no join service answers (`constellation recover`); a node
 * whose bootstrapper does not answer is `unreachable`, one whose instance does not run is `stopped`.
 * Beside the state, each node reports what it runs (image and a digest of its measurements, Kubernetes and
 * microservice versions, attestation variant) and the last verifier's decision about it; a node is up to date when
 * what it runs is what the config asks for. What a node reports is informational: `constellation verify` proves it.
 */
import type { Instance, InfrastructureProvider, ResourceJournal } from '../../providers/contract.js';
import type { AttestationOutcome, NodeStatus, VerifyClient } from '../../proto/gen/constellation/verify.js';
import type { Logger } from '../../lib/logging/index.js';
import type { StoreHealth } from '../../lib/cluster-store/etcd-members.js';
import { NO_QUORUM_MESSAGE } from '../../lib/cluster-store/types.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { trustedMeasurements, withWorkspaceStore, workspaceStoreHealth } from './store.js';

export const VERIFY_PORT = 30081;

export type NodeState =
  'joined' | 'joining' | 'waiting' | 'awaiting-recovery' | 'refused' | 'failed' | 'unreachable' | 'stopped';

/** What a node runs (as it reports it), or what the config asks for. */
export interface SoftwareVersions {
  image: string;
  /** First 12 hex digits of SHA-256 over the image PCRs (lib/attestation/measurements.ts imageMeasurementsDigest). */
  measurementsDigest: string;
  kubernetesVersion: string;
  microserviceVersion: string;
  attestationVariant: string;
  /**
   * What the config asks for only: the image version its nodes report, where `image` is not one (a qemu image
   * folder: the version of the image in it). A node's `image` is compared with this when it is set.
   */
  imageVersion?: string;
}

export interface NodeStatusEntry {
  name: string;
  role: string;
  address: string;
  state: NodeState;
  /** Why a node is refused, failed, unreachable, stopped or waiting. */
  reason?: string;
  /** What the node reports it runs; absent when it does not answer. */
  software?: SoftwareVersions;
  /** Whether the node runs what the config asks for (absent when unknown: no answer, or no expectation given). */
  upToDate?: boolean;
  /** What differs from the config, e.g. "kubernetesVersion v1.31.1, config v1.32.10". */
  outdated?: string[];
  lastAttestation?: { result: string; time: string; verifier: string; reason?: string };
}

export interface ClusterStatus {
  /** The cluster store's members and quorum (etcd), once the cluster was initialized from this workspace. */
  store?: StoreHealth & { backend: 'etcd' };
  /** The measurements the cluster store trusts (digests): its current set and the previous ones still accepted. */
  trusted?: { current: string; previous: string[] };
  /** What the config asks for, when the command knows the config. */
  expected?: SoftwareVersions;
  /** The CLI's own version. */
  cliVersion?: string;
  nodes: NodeStatusEntry[];
}

export interface StatusOptions {
  workspaceDir: string;
  provider: InfrastructureProvider;
  journal: ResourceJournal;
  log: Logger;
  /** The cluster's ID (hex) once initialized: a node that reports another one is not part of this cluster. */
  clusterId?: string;
  /** What the config asks for: each node is compared with it. */
  expected?: SoftwareVersions;
  cliVersion?: string;
  port?: number;
  /** Longest wait for one node's answer. */
  timeoutMs?: number;
  /**
   * Ask the cluster store for its health and measurements (default true). A wait for nodes to join asks only the
   * nodes: the store's client is the largest module the CLI loads (etcd's API definitions, parsed at load).
   */
  store?: boolean;
  /** Nodes whose answer is final for the caller (a wait's joined nodes), by name: not asked again. */
  settled?: ReadonlyMap<string, NodeStatusEntry>;
  /** Connections kept across calls (a wait's polls); default: one connection per question. */
  connections?: NodeStatusConnections;
}

export async function clusterStatus(options: StatusOptions): Promise<ClusterStatus> {
  const instances = await options.provider.listInstances({
    journal: clusterJournalView(options.journal),
    log: options.log,
    workspaceDir: options.workspaceDir,
  });
  const askStore = options.store !== false && Boolean(options.clusterId);
  const [nodes, store, trusted] = await Promise.all([
    Promise.all(instances.map((instance) => options.settled?.get(instance.name) ?? nodeStatus(instance, options))),
    askStore ? workspaceStoreHealth(options.workspaceDir, instances, options.log) : undefined,
    // What the join services accept, to compare with the config (a store that cannot answer shows as its health).
    askStore && options.expected
      ? withWorkspaceStore(options.workspaceDir, instances, trustedMeasurements).catch(() => undefined)
      : undefined,
  ]);
  return {
    ...(store ? { store } : {}),
    ...(trusted ? { trusted } : {}),
    ...(options.expected ? { expected: options.expected } : {}),
    ...(options.cliVersion ? { cliVersion: options.cliVersion } : {}),
    nodes: explainWaiting(nodes, options.provider.name),
  };
}

/** Control-plane states that count as down for the quorum of a highly available control plane. */
const DOWN: readonly NodeState[] = ['stopped', 'unreachable', 'awaiting-recovery', 'failed'];

/**
 * A node that waits because the control plane has no quorum says why in its own words ("The control plane has no
 * quorum: …"); status adds which control planes are down and what to run: start them (the local provider's
 * `mini start`, a cloud's console), or, when every control plane rebooted, `constellation recover`.
 */
export function explainWaiting(nodes: NodeStatusEntry[], provider: string): NodeStatusEntry[] {
  const controlPlanes = nodes.filter((n) => n.role === 'control-plane');
  const down = controlPlanes.filter((n) => DOWN.includes(n.state)).map((n) => n.name);
  const running = controlPlanes.length - down.length;
  const needed = Math.floor(controlPlanes.length / 2) + 1;
  return nodes.map((n) => {
    if (n.state !== 'waiting' || !n.reason?.startsWith(NO_QUORUM_MESSAGE)) return n;
    const start =
      down.length === 0
        ? ''
        : provider === 'local'
          ? `run \`constellation mini start ${down.join(' ')}\``
          : `start ${down.join(', ')} in the cloud's console`;
    const what = [
      `it waits for a majority of the control planes (${needed} of ${controlPlanes.length}; ${running} run${down.length > 0 ? `, ${down.join(', ')} ${down.length === 1 ? 'is' : 'are'} down` : ''})`,
      start,
      '`constellation recover` if every control plane rebooted',
    ].filter(Boolean);
    return { ...n, reason: `${n.reason.replace(/\.$/, '')}; ${what.join('; ')}` };
  });
}

/** How many nodes are in each state, e.g. "2 of 3 nodes joined; 1 refused", and how many are up to date. */
export function summarizeStatus(status: ClusterStatus): string {
  const joined = status.nodes.filter((n) => n.state === 'joined').length;
  const others = new Map<string, number>();
  for (const n of status.nodes) if (n.state !== 'joined') others.set(n.state, (others.get(n.state) ?? 0) + 1);
  const rest = [...others].map(([state, count]) => `${count} ${state}`).join(', ');
  const summary = `${joined} of ${status.nodes.length} node${status.nodes.length === 1 ? '' : 's'} joined${rest ? `; ${rest}` : ''}`;
  const store = status.store ? `; cluster store: ${describeStore(status.store)}` : '';
  if (!status.expected) return `${summary}${store}`;
  const current = status.nodes.filter((n) => n.upToDate).length;
  return `${summary}; ${current} of ${status.nodes.length} up to date with the config${store}`;
}

/**
 * What the store's join services accept next to the config: "trusts the config's measurements", or that they differ
 * (after a rollback or an interrupted run: `upgrade apply` brings them together), and any previous set of a rollout.
 */
export function describeTrust(trusted: NonNullable<ClusterStatus['trusted']>, expected: SoftwareVersions): string {
  const current =
    trusted.current === expected.measurementsDigest
      ? `the cluster store trusts the config's measurements (${trusted.current})`
      : `the cluster store trusts measurements ${trusted.current}, not the config's ${expected.measurementsDigest || '(unknown)'}: \`constellation upgrade apply\` brings them together`;
  return trusted.previous.length > 0
    ? `${current}; it also accepts ${trusted.previous.join(', ')} until a rollout ends`
    : current;
}

/** "3 of 3 members healthy, quorum" or "1 of 3 members healthy, NO QUORUM". */
export function describeStore(store: StoreHealth): string {
  if (store.voters === 0) return 'unreachable, NO QUORUM';
  return `${store.healthyVoters} of ${store.voters} members healthy, ${store.quorum ? 'quorum' : 'NO QUORUM'}`;
}

async function nodeStatus(instance: Instance, options: StatusOptions): Promise<NodeStatusEntry> {
  const address = instance.publicIp || instance.privateIp;
  const base = { name: instance.name, role: instance.role, address };
  if (instance.state !== 'running') {
    return {
      ...base,
      state: instance.state === 'pending' ? 'waiting' : 'stopped',
      reason: `the instance is ${instance.state}`,
    };
  }
  if (!address) return { ...base, state: 'waiting', reason: 'the instance has no address yet' };
  let answer: NodeStatus;
  try {
    const target = `${address}:${options.port ?? VERIFY_PORT}`;
    const timeoutMs = options.timeoutMs ?? 3000;
    answer = await (options.connections?.getStatus(target, timeoutMs) ?? getNodeStatus(target, timeoutMs));
  } catch (err) {
    const reason = (err as { details?: string }).details || (err as Error).message;
    options.log.debug('node did not answer GetStatus', { node: instance.name, reason });
    return { ...base, state: 'unreachable', reason: `its bootstrapper does not answer: ${reason}` };
  }
  const software: SoftwareVersions = {
    image: answer.imageVersion,
    measurementsDigest: answer.imageMeasurementsDigest,
    // A cluster without Kubernetes (expected version empty: expectedForStatus) shows none, whatever the node says.
    kubernetesVersion: options.expected?.kubernetesVersion === '' ? '' : answer.kubernetesVersion,
    microserviceVersion: answer.microserviceVersion,
    attestationVariant: answer.attestationVariant,
  };
  const details = {
    software,
    ...comparison(software, options.expected),
    ...(answer.lastAttestation ? { lastAttestation: outcome(answer.lastAttestation) } : {}),
  };
  if (options.clusterId && answer.clusterId && answer.clusterId.toLowerCase() !== options.clusterId.toLowerCase()) {
    return {
      ...base,
      state: 'failed',
      reason: `it belongs to another cluster (cluster ID ${answer.clusterId})`,
      ...details,
    };
  }
  return { ...base, ...mapState(answer), ...details };
}

/** What differs between what a node runs and what the config asks for; the Kubernetes version once it has one. */
function comparison(
  software: SoftwareVersions,
  expected: SoftwareVersions | undefined,
): Pick<NodeStatusEntry, 'upToDate' | 'outdated'> {
  if (!expected) return {};
  const outdated: string[] = [];
  for (const key of [
    'image',
    'measurementsDigest',
    'kubernetesVersion',
    'microserviceVersion',
    'attestationVariant',
  ] as const) {
    if (key === 'kubernetesVersion' && software.kubernetesVersion === '') continue; // not in a cluster yet
    const want = key === 'image' ? (expected.imageVersion ?? expected.image) : expected[key];
    if (normalize(software[key]) !== normalize(want))
      outdated.push(`${key} ${software[key] || '(none)'}, config ${want || '(none)'}`);
  }
  return { upToDate: outdated.length === 0, ...(outdated.length > 0 ? { outdated } : {}) };
}

const normalize = (version: string) => version.replace(/^v/, '').toLowerCase();

function outcome(o: AttestationOutcome): NonNullable<NodeStatusEntry['lastAttestation']> {
  return { result: o.result, time: o.time, verifier: o.verifier, ...(o.reason ? { reason: o.reason } : {}) };
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
    case 'awaiting-recovery':
      return { state: 'awaiting-recovery', reason: reason ?? 'no join service answers: run `constellation recover`' };
    case 'refused':
      return { state: 'refused', reason: reason ?? 'the join service refused it' };
    case 'failed':
      return { state: 'failed', reason: reason ?? 'the bootstrapper failed' };
    default:
      return { state: 'failed', reason: `the bootstrapper reports an unknown state "${answer.state}"` };
  }
}

/** How long a node is asked to hold a GetStatus until its state changes (verify.proto's long poll). */
const STATUS_WAIT_MS = 1000;

/**
 * GetStatus over one connection per node, kept open across calls until close(): a wait that asks again and again
 * then costs the nodes (busy joining) and itself no TLS handshake per question. A node that does not listen yet is
 * retried every quarter second at most, as init's connection is, so it is found soon after it does.
 */

export class NodeStatusConnections {
  private readonly clients = new Map<string, Promise<VerifyClient>>();
  /** Each node's state in its last answer. */
  private readonly known = new Map<string, string>();

  /**
   * GetStatus over the node's kept connection. After a first answer the node is asked to answer when its state is
   * another than that answer's, or after STATUS_WAIT_MS: a change is seen when it happens. (A node that does not
   * know the long poll answers at once; the caller spaces its questions.)
   */
  async getStatus(address: string, timeoutMs: number): Promise<NodeStatus> {
    let client = this.clients.get(address);
    if (!client) {
      client = verifyClient(address, {
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 250,
      });
      this.clients.set(address, client);
    }
    const known = this.known.get(address);
    const answer = await askStatus(await client, timeoutMs, known ? { knownState: known, waitMs: STATUS_WAIT_MS } : {});
    this.known.set(address, answer.state);
    return answer;
  }

  async close(): Promise<void> {
    const clients = [...this.clients.values()];
    this.clients.clear();
    for (const client of await Promise.allSettled(clients)) if (client.status === 'fulfilled') client.value.close();
  }
}

/** One GetStatus call (plain TLS with the node's self-signed certificate: nothing secret crosses it). */
export async function getNodeStatus(address: string, timeoutMs: number): Promise<NodeStatus> {
  const client = await verifyClient(address);
  try {
    return await askStatus(client, timeoutMs);
  } finally {
    client.close();
  }
}

/** A client of a node's verify service over aTLS (its modules loaded on first use: the CLI's start stays light). */
async function verifyClient(address: string, channelOptions: Record<string, number> = {}): Promise<VerifyClient> {
  const [{ VerifyClient }, { createAttestedClientCredentials, attestedChannelOptions }] = await Promise.all([
    import('../../proto/gen/constellation/verify.js'),
    import('../../lib/atls/credentials.js'),
  ]);
  return new VerifyClient(address, await createAttestedClientCredentials(), {
    ...attestedChannelOptions,
    ...channelOptions,
  });
}

async function askStatus(
  client: VerifyClient,
  timeoutMs: number,
  longPoll: { knownState?: string; waitMs?: number } = {},
): Promise<NodeStatus> {
  const { Metadata } = await import('@grpc/grpc-js');
  const request = { knownState: '', waitMs: 0, ...longPoll };
  return new Promise<NodeStatus>((resolve, reject) => {
    client.getStatus(request, new Metadata(), { deadline: Date.now() + timeoutMs + request.waitMs }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

/**
 * Whether the config's cluster runs Kubernetes: every provider but local with its default backend `none` (whose
 * nodes report the config's version without running it). Where it does not, status shows no Kubernetes version.
 */
export async function runsKubernetes(config: import('../../lib/config/index.js').Config): Promise<boolean> {
  const { providerOf } = await import('../../lib/config/index.js');
  // A qemu image runs the backend on its kernel command line: `none` unless it was built with Kubernetes binaries.
  if (providerOf(config) === 'qemu') return false;
  if (providerOf(config) !== 'local') return true;
  return (config.provider as { local?: { kubernetesBackend?: string } }).local?.kubernetesBackend === 'kubeadm';
}

/** What the status command expects of the nodes: the config's software, without a Kubernetes version where none runs. */
export async function expectedForStatus(
  config: import('../../lib/config/index.js').Config,
  workspaceDir?: string,
): Promise<SoftwareVersions> {
  const software = await configuredSoftware(config, workspaceDir);
  return (await runsKubernetes(config)) ? software : { ...software, kubernetesVersion: '' };
}

/**
 * What the config asks the nodes to run. A qemu config's `image` may be a folder (relative to `workspaceDir`): its
 * nodes report the version of the image in it, which `imageVersion` carries.
 */
export async function configuredSoftware(
  config: import('../../lib/config/index.js').Config,
  workspaceDir?: string,
): Promise<SoftwareVersions> {
  const [{ attestationVariantOf, measurementsOf, providerOf }, { imageMeasurementsDigest }] = await Promise.all([
    import('../../lib/config/index.js'),
    import('../../lib/attestation/measurements.js'),
  ]);
  let imageVersion: string | undefined;
  if (providerOf(config) === 'qemu') {
    const { isImagePath, qemuImageVersion } = await import('../../providers/qemu/image.js');
    if (isImagePath(config.image)) imageVersion = await qemuImageVersion(config.image, workspaceDir);
  }
  return {
    image: config.image,
    ...(imageVersion !== undefined ? { imageVersion } : {}),
    measurementsDigest: imageMeasurementsDigest(measurementsOf(config)),
    kubernetesVersion: config.kubernetesVersion,
    microserviceVersion: config.microserviceVersion,
    attestationVariant: attestationVariantOf(config),
  };
}
