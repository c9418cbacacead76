/**
 * CLI side of the cloud daemon (./cloud-daemon.ts): makes sure the cluster's network exists (./network.ts: the
 * gateway namespace and an address range, claimed atomically, so two clusters created at the same time never get
 * the same one), starts the daemon in the gateway namespace when it is not running, and talks to its control API
 * with the workspace's control token.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { UserError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { ProviderContext } from '../contract.js';
import type { CloudConfig } from './cloud-daemon.js';
import type { ClusterFile } from './cluster-file.js';
import { requestJson } from './http-json.js';
import { gatewayAddress, LOAD_BALANCER_PORTS } from './layout.js';
import type { ClusterSettings, NodeRegistration } from './metadata-server.js';
import { ADDRESS_POOL_ENV, candidateRanges, ClusterNetwork, newNetworkId, parseAddressPool } from './network.js';
import { detachedProgram, isOwnedBy, spawnDetached, stopOwnedProcesses } from './processes.js';

export const CLOUD_RESOURCE_ID = 'local-cloud';
export const CLUSTER_RESOURCE_ID = 'local-cluster';
export const NETWORK_RESOURCE_ID = 'local-network';

export interface NetworkOptions {
  /** The pool that cluster ranges come from (./network.ts), e.g. "10.213.0.0/16". */
  addressPool: string;
  /** Randomness for choosing the first range to try (tests). */
  random?: () => number;
  /** The cloud daemon answers DHCP for the registered nodes (VM nodes: providers/qemu/). */
  dhcp?: boolean;
}

export function metadataUrl(prefix: string, port: number): string {
  return `http://${gatewayAddress(prefix)}:${port}`;
}

/** The daemon's control API (register/unregister nodes, cluster settings). */
export class CloudControl {
  constructor(
    readonly metadataUrl: string,
    private readonly token: string,
  ) {}

  setCluster(settings: ClusterSettings): Promise<void> {
    return requestJson(`${this.metadataUrl}/v1/control/cluster`, { method: 'PUT', body: settings, token: this.token });
  }

  registerNode(name: string, registration: NodeRegistration): Promise<void> {
    return requestJson(`${this.metadataUrl}/v1/control/nodes/${encodeURIComponent(name)}`, {
      method: 'PUT',
      body: registration,
      token: this.token,
    });
  }

  unregisterNode(name: string): Promise<void> {
    return requestJson(`${this.metadataUrl}/v1/control/nodes/${encodeURIComponent(name)}`, {
      method: 'DELETE',
      token: this.token,
    });
  }
}

async function controlToken(file: string): Promise<string> {
  try {
    return (await readRegularFile(file, { what: 'the control token', maxBytes: SIZE_LIMITS.nodeFile }))
      .toString('utf8')
      .trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(32).toString('hex');
  await writeFileAtomic(file, `${token}\n`, { exclusive: true, mode: 0o600 });
  return token;
}

/**
 * The cluster's network, made or completed as far as it is missing: the gateway namespace (its name recorded in the
 * journal before it exists), a claimed address range (recorded in cluster.json), addresses and bridge. Ends with
 * `file.record.prefix` set.
 */
export async function ensureNetwork(
  file: ClusterFile,
  ctx: ProviderContext,
  options: NetworkOptions,
): Promise<ClusterNetwork> {
  const { record } = file;
  if (!record.netId) {
    if (record.prefix) {
      throw new UserError(
        `This local cluster was created by an earlier version, with loopback addresses (${record.prefix}.x).`,
        {
          hint: 'Terminate it (constellation terminate) and create it again: local nodes now run in their own network namespaces.',
        },
      );
    }
    await file.update((r) => {
      r.netId = newNetworkId();
    });
  }
  const network = new ClusterNetwork(record.netId as string);
  await ctx.journal.record({
    kind: 'local:network',
    id: NETWORK_RESOURCE_ID,
    name: network.gateway,
    dependsOn: [CLUSTER_RESOURCE_ID],
    data: { netId: network.id },
  });
  const present = await network.ensureGateway();
  // An uplink without a recorded range is the claim of a run killed before it recorded it: give it up, claim again.
  if (present.uplink && !record.prefix) await network.releaseRange();
  if (!present.uplink || !record.prefix) {
    const prefix = record.prefix ?? (await claimFreeRange(network, options));
    if (record.prefix && !(await network.claimRange(prefix))) {
      throw new UserError(`The local cluster's address range ${prefix}.0/24 is taken by another local cluster.`, {
        hint: 'Terminate this cluster (constellation terminate) and create it again: it gets a free range.',
      });
    }
    await file.update((r) => {
      r.prefix = prefix;
    });
  }
  await network.configure(record.prefix as string, present);
  return network;
}

/** Claims the first free /24 of the pool that overlaps none of the machine's routes. */
async function claimFreeRange(network: ClusterNetwork, options: NetworkOptions): Promise<string> {
  const pool = parseAddressPool(options.addressPool);
  for (const prefix of candidateRanges(pool, await network.routes(), options.random)) {
    if (await network.claimRange(prefix)) return prefix;
  }
  throw new UserError(
    `No free address range (/24) is left in the local clusters' address pool ${options.addressPool}.`,
    {
      hint: `Its ranges are used by this machine's networks or by other local clusters. Terminate local clusters you no longer need, or set ${ADDRESS_POOL_ENV} to another private network that this machine does not use.`,
    },
  );
}

/**
 * Makes sure the cluster's cloud daemon runs (and, before it starts, the cluster's network: `network`, by default
 * ensureNetwork). `started` tells the caller that the daemon is fresh and knows no nodes yet (the daemon keeps
 * nothing on disk), so every recorded node must be registered again.
 */
export async function ensureCloud(
  file: ClusterFile,
  ctx: ProviderContext,
  options: NetworkOptions,
  network: () => Promise<ClusterNetwork> = () => ensureNetwork(file, ctx, options),
): Promise<{ control: CloudControl; started: boolean }> {
  const { paths, record } = file;
  const token = await controlToken(paths.controlToken);
  if (record.prefix && record.netId && record.cloudPid && (await isOwnedBy(record.cloudPid, paths.cloudOwner))) {
    return { control: new CloudControl(metadataUrl(record.prefix, record.metadataPort), token), started: false };
  }
  const { gateway: netns } = await network();
  const prefix = record.prefix as string;
  const gateway = gatewayAddress(prefix);
  // A daemon that an interrupted run started but never recorded would hold the ports (only a run that got as far as
  // writing cloud.json can have started one).
  if (await fileExists(paths.cloudConfig)) await stopOwnedProcesses(paths.cloudOwner, [record.cloudPid ?? 0]);
  const config: CloudConfig = {
    prefix,
    metadataPort: record.metadataPort,
    loadBalancerPorts: [...LOAD_BALANCER_PORTS],
    controlTokenFile: paths.controlToken,
    ...(options.dhcp ? { dhcp: true } : {}),
  };
  await writeFileAtomic(paths.cloudConfig, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  ctx.progress?.(`starting metadata server and load balancer on ${gateway}`);
  const { pid, message } = await spawnDetached({
    file: detachedProgram('cloud-daemon'),
    args: [paths.cloudConfig],
    owner: paths.cloudOwner,
    cwd: paths.dir,
    logFile: paths.cloudLog,
    netns,
  });
  if (message.type === 'error') {
    throw new UserError(
      `The local cluster's metadata server and load balancer did not start on ${gateway}: ${message.message}`,
      {
        hint: `See ${paths.cloudLog}.`,
      },
    );
  }
  await file.update((r) => {
    r.cloudPid = pid;
  });
  await ctx.journal.record({
    kind: 'local:cloud',
    id: CLOUD_RESOURCE_ID,
    name: gateway,
    dependsOn: [NETWORK_RESOURCE_ID],
    data: { pid },
  });
  ctx.log.debug('local cloud daemon started', { pid, gateway, netns });
  return { control: new CloudControl(metadataUrl(prefix, record.metadataPort), token), started: true };
}

function fileExists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
