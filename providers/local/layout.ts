/**
 * Where the local provider keeps its cluster in the workspace, and the fixed network numbers of a local cluster
 * (the namespaces and links that carry them: ./network.ts).
 * One place for these names so the CLI side, the cloud daemon and the launcher agree on them.
 *
 *   <workspace>/constellation-local/
 *     cluster.json            the provider's record: uid, network id, address prefix, PIDs, nodes (CLI side writes it)
 *     cloud.json, cloud.log   the cloud daemon's config and log (metadata server + load balancer)
 *     control-token           bearer token of the daemon's control API (0600): only the CLI side registers nodes
 *     nodes/<name>/           one folder per node: tpm/, state-disk/ (encrypted), state/ (its mount point), node.log,
 *                             launch.json, launcher.pid, address
 *
 *   /run/constellation/<16 hex digits of SHA-256(cluster folder)>/   the cluster's runtime folder (root's, tmpfs)
 *     <node>/swtpm.sock, swtpm.sock.ctrl                            the node's TPM sockets
 *
 * The sockets live apart from the workspace because a unix socket's path has at most 107 bytes, and a workspace may
 * be anywhere: the runtime folder's path has the same short length for every workspace (docs/getting-started.md).
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { NodeRole } from '../contract.js';
import { UserError } from '../../lib/errors.js';

export const LOCAL_DIR = 'constellation-local';
/** Where the local clusters' runtime folders (unix sockets) are: root's tmpfs, so a path that is short everywhere. */
export const RUNTIME_ROOT = '/run/constellation';

/** The metadata server's port on the cluster's gateway address (<prefix>.1). */
export const METADATA_PORT = 8080;
/** Ports the load balancer forwards to the control-plane nodes (docs/design.md#ports): Kubernetes API, init, join, verify, recover. */
export const LOAD_BALANCER_PORTS = [6443, 9000, 30090, 30081, 9999] as const;

export interface ClusterPaths {
  dir: string;
  clusterFile: string;
  cloudConfig: string;
  cloudLog: string;
  controlToken: string;
  nodesDir: string;
  /** The cloud daemon's owner mark (./processes.ts): below the cluster folder, apart from the nodes'. */
  cloudOwner: string;
  /** The cluster's runtime folder: the nodes' unix sockets, under a path of fixed length (see the header). */
  runtimeDir: string;
}

export function clusterPaths(workspaceDir: string): ClusterPaths {
  const dir = path.join(path.resolve(workspaceDir), LOCAL_DIR);
  return {
    dir,
    clusterFile: path.join(dir, 'cluster.json'),
    cloudConfig: path.join(dir, 'cloud.json'),
    cloudLog: path.join(dir, 'cloud.log'),
    controlToken: path.join(dir, 'control-token'),
    nodesDir: path.join(dir, 'nodes'),
    cloudOwner: path.join(dir, 'cloud'),
    runtimeDir: path.join(RUNTIME_ROOT, createHash('sha256').update(dir).digest('hex').slice(0, 16)),
  };
}

export interface NodePaths {
  dir: string;
  tpmDir: string;
  /** The state disk: a folder with its UUID and gocryptfs's ciphertext (the node encrypts it). */
  stateDisk: string;
  /** Where the node mounts its unlocked state disk. */
  stateDir: string;
  log: string;
  launchConfig: string;
  launcherPid: string;
  address: string;
  /** The node's TPM sockets (swtpm.sock, swtpm.sock.ctrl): in the cluster's runtime folder. */
  socketDir: string;
}

const NODE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function nodePaths(workspaceDir: string, name: string): NodePaths {
  if (!NODE_NAME.test(name)) {
    throw new UserError(`"${name}" is not a valid local node name.`, {
      hint: 'Node names are lowercase letters, digits and dashes (as in "control-plane-default-0").',
    });
  }
  const cluster = clusterPaths(workspaceDir);
  const dir = path.join(cluster.nodesDir, name);
  return {
    dir,
    tpmDir: path.join(dir, 'tpm'),
    stateDisk: path.join(dir, 'state-disk'),
    stateDir: path.join(dir, 'state'),
    log: path.join(dir, 'node.log'),
    launchConfig: path.join(dir, 'launch.json'),
    launcherPid: path.join(dir, 'launcher.pid'),
    address: path.join(dir, 'address'),
    socketDir: path.join(cluster.runtimeDir, name),
  };
}

/**
 * Host numbers inside the cluster's /24 (see ./network.ts): .1 the gateway (metadata server and load balancer, in the
 * gateway namespace), .2 this machine (the root namespace: the CLI), control planes .10+, workers .100+.
 */
const HOST_RANGES: Record<NodeRole, [first: number, last: number]> = {
  'control-plane': [10, 99],
  worker: [100, 254],
};

export function gatewayAddress(prefix: string): string {
  return `${prefix}.1`;
}

/**
 * The metadata server (http://<prefix>.1:<port>) of the cluster a node address (host or host:port) belongs to, on
 * the default port; undefined for anything but an IPv4 address.
 */
export function metadataUrlOfNode(nodeAddress: string): string | undefined {
  const parts = nodeAddress.replace(/:\d+$/, '').split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined;
  return `http://${gatewayAddress(parts.slice(0, 3).join('.'))}:${METADATA_PORT}`;
}

/** The root namespace's address in the cluster's range: where the CLI's connections to the cluster come from. */
export function hostAddress(prefix: string): string {
  return `${prefix}.2`;
}

/** The lowest free host number of the role's range, given the host numbers nodes already have. */
export function allocateHost(role: NodeRole, taken: Iterable<number>): number {
  const used = new Set(taken);
  const [first, last] = HOST_RANGES[role];
  for (let host = first; host <= last; host++) if (!used.has(host)) return host;
  throw new UserError(`No free address left for another ${role} node.`, {
    hint: `A local cluster has at most ${last - first + 1} ${role} nodes.`,
  });
}

export function nodeAddress(prefix: string, host: number): string {
  return `${prefix}.${host}`;
}
