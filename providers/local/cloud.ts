/**
 * CLI side of the cloud daemon (./cloud-daemon.ts): starts it when it is not running, choosing a free address
 * range 127.0.N.0/24 (the daemon binding <prefix>.1 is what reserves a range, so two clusters created at the same
 * time cannot both get it), and talks to its control API with the workspace's control token.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { UserError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { ProviderContext } from '../contract.js';
import type { CloudConfig } from './cloud-daemon.js';
import type { ClusterStore } from './cluster-record.js';
import { requestJson } from './http-json.js';
import { candidatePrefixes, gatewayAddress, LOAD_BALANCER_PORTS } from './layout.js';
import type { NodeRegistration } from './metadata-server.js';
import { isOwnedBy, siblingModule, spawnDetached } from './processes.js';

export const CLOUD_RESOURCE_ID = 'local-cloud';
export const CLUSTER_RESOURCE_ID = 'local-cluster';

export function metadataUrl(prefix: string, port: number): string {
  return `http://${gatewayAddress(prefix)}:${port}`;
}

/** The daemon's control API (register/unregister nodes, cluster settings). */
export class CloudControl {
  constructor(
    readonly metadataUrl: string,
    private readonly token: string,
  ) {}

  setCluster(settings: { initSecretHash: string }): Promise<void> {
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
    return requestJson(`${this.metadataUrl}/v1/control/nodes/${encodeURIComponent(name)}`, { method: 'DELETE', token: this.token });
  }
}

async function controlToken(file: string): Promise<string> {
  try {
    return (await readRegularFile(file, { what: 'the control token', maxBytes: SIZE_LIMITS.nodeFile })).toString('utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(32).toString('hex');
  await writeFileAtomic(file, `${token}\n`, { exclusive: true, mode: 0o600 });
  return token;
}

/** Quick check before spawning a daemon: can <gateway>:port be bound right now? */
function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * Makes sure the cluster's cloud daemon runs. `started` tells the caller that the daemon is fresh and knows no
 * nodes yet (the daemon keeps nothing on disk), so every recorded node must be registered again.
 */
export async function ensureCloud(
  store: ClusterStore,
  ctx: ProviderContext,
  random?: () => number,
): Promise<{ control: CloudControl; started: boolean }> {
  const { paths, record } = store;
  const token = await controlToken(paths.controlToken);
  if (record.prefix && record.cloudPid && (await isOwnedBy(record.cloudPid, paths.dir))) {
    return { control: new CloudControl(metadataUrl(record.prefix, record.metadataPort), token), started: false };
  }
  // Once nodes have addresses in a range, the cluster stays there.
  const candidates = record.prefix ? [record.prefix] : candidatePrefixes(random);
  for (const prefix of candidates) {
    const gateway = gatewayAddress(prefix);
    if (!(await canBind(gateway, record.metadataPort))) continue;
    const config: CloudConfig = {
      prefix,
      metadataPort: record.metadataPort,
      loadBalancerPorts: [...LOAD_BALANCER_PORTS],
      controlTokenFile: paths.controlToken,
    };
    await writeFileAtomic(paths.cloudConfig, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    ctx.progress?.(`starting metadata server and load balancer on ${gateway}`);
    const { pid, message } = await spawnDetached({
      file: siblingModule('cloud-daemon'),
      args: [paths.cloudConfig],
      owner: paths.dir,
      cwd: paths.dir,
      logFile: paths.cloudLog,
    });
    if (message.type === 'error') {
      if (message.code === 'EADDRINUSE' && !record.prefix) continue;
      throw new UserError(`The local cluster's metadata server and load balancer did not start on ${gateway}: ${message.message}`, {
        hint:
          message.code === 'EADDRINUSE'
            ? `Another process uses ports of ${gateway} (${record.metadataPort}, ${LOAD_BALANCER_PORTS.join(', ')}). Stop it, or terminate this cluster and create it again.`
            : `See ${paths.cloudLog}.`,
      });
    }
    await store.update((r) => {
      r.prefix = prefix;
      r.cloudPid = pid;
    });
    await ctx.journal.record({ kind: 'local:cloud', id: CLOUD_RESOURCE_ID, name: gateway, dependsOn: [CLUSTER_RESOURCE_ID], data: { pid } });
    ctx.log.debug('local cloud daemon started', { pid, gateway });
    return { control: new CloudControl(metadataUrl(prefix, record.metadataPort), token), started: true };
  }
  throw new UserError(
    record.prefix
      ? `The local cluster's address ${gatewayAddress(record.prefix)} is taken by another process.`
      : 'No free address range 127.0.N.0/24 is left for a local cluster.',
    { hint: 'Terminate local clusters you no longer need (constellation terminate, or mini down in their workspaces).' },
  );
}
