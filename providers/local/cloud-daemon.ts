/**
 * The local cluster's "cloud": one detached process per cluster that runs the metadata server and the TCP load
 * balancer on the gateway address <prefix>.1, in the cluster's gateway network namespace (./network.ts), where no
 * other process of the machine can bind that address. Started by the CLI side (./cloud.ts) as
 * `nsenter --net=<gateway namespace> -- node cloud-daemon.cjs <cluster folder>/cloud.json` (its bundle, see
 * ./processes.ts detachedProgram); it reports {type:'ready'}
 * or {type:'error', code} over IPC and runs until SIGTERM.
 * It keeps no state on disk: the CLI side registers the nodes again whenever it (re)starts the daemon.
 */
import type { Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { startDhcpServer, type DhcpServer } from './dhcp-server.js';
import { startLoadBalancer, type LoadBalancer } from './load-balancer.js';
import { CloudRegistry, createMetadataServer } from './metadata-server.js';
import { reportStartup } from './processes.js';

export interface CloudConfig {
  /** The cluster's /24 ("10.213.5"). */
  prefix: string;
  metadataPort: number;
  loadBalancerPorts: number[];
  controlTokenFile: string;
  /** Answer DHCP for the registered nodes (VM nodes, providers/qemu/; ./dhcp-server.ts). */
  dhcp?: boolean;
}

/**
 * Checks a parsed cloud.json (written by the CLI side, ./cloud.ts); throws naming the first bad field. By hand, as
 * the launcher checks its launch config: loading a schema library was most of this process's start, which is on
 * the path to every node's boot.
 */
export function parseCloudConfig(value: unknown): CloudConfig {
  const isPort = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error('cloud config: the file must hold an object');
  const c = value as Record<string, unknown>;
  if (typeof c.prefix !== 'string' || !/^\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(c.prefix))
    throw new Error('cloud config: prefix must be the first three octets of an IPv4 address');
  if (!isPort(c.metadataPort)) throw new Error('cloud config: metadataPort must be a port number');
  if (!Array.isArray(c.loadBalancerPorts) || !c.loadBalancerPorts.every(isPort))
    throw new Error('cloud config: loadBalancerPorts must be a list of port numbers');
  if (typeof c.controlTokenFile !== 'string') throw new Error('cloud config: controlTokenFile must be a string');
  if (c.dhcp !== undefined && typeof c.dhcp !== 'boolean') throw new Error('cloud config: dhcp must be true or false');
  return {
    prefix: c.prefix,
    metadataPort: c.metadataPort as number,
    loadBalancerPorts: c.loadBalancerPorts as number[],
    controlTokenFile: c.controlTokenFile,
    ...(c.dhcp !== undefined ? { dhcp: c.dhcp } : {}),
  };
}

/**
 * How long the load balancer holds a connection that no control plane takes yet (./load-balancer.ts): the CLI's init
 * call and the nodes' join requests reach the control plane as soon as it listens. With no control plane up, a held
 * connection is dropped after this long, as it was dropped at once before.
 */
export const LOAD_BALANCER_HOLD_MS = 2000;
/**
 * The ports whose connections are held: init (9000) and join (30090), the calls that wait for a control plane to come
 * up. Not recover's (9999): `recover -e <load balancer>` asks until no recovery server answers, which a hold would
 * only delay.
 */
export const LOAD_BALANCER_HELD_PORTS = [9000, 30090] as const;

export interface RunningCloud {
  close(): Promise<void>;
}

/** Starts metadata server and load balancer; rejects with the bind error when an address is taken. */
export async function startCloud(config: CloudConfig, controlToken: string): Promise<RunningCloud> {
  const gateway = `${config.prefix}.1`;
  const registry = new CloudRegistry();
  const server: Server = createMetadataServer({ registry, gateway, controlToken });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.metadataPort, gateway, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  let lb: LoadBalancer;
  let dhcp: DhcpServer | undefined;
  try {
    lb = await startLoadBalancer({
      host: gateway,
      ports: config.loadBalancerPorts,
      backends: () => registry.controlPlaneAddresses(),
      holdMs: LOAD_BALANCER_HOLD_MS,
      holdPorts: LOAD_BALANCER_HELD_PORTS,
    });
  } catch (err) {
    server.close();
    throw err;
  }
  if (config.dhcp) {
    try {
      dhcp = await startDhcpServer({
        gateway,
        isNode: (address) => registry.byAddress(address) !== undefined,
        log: (line) => console.log(`${new Date().toISOString()} ${line}`),
      });
    } catch (err) {
      server.close();
      await lb.close();
      throw err;
    }
  }
  return {
    async close() {
      server.closeAllConnections();
      await Promise.all([new Promise((resolve) => server.close(resolve)), lb.close(), dhcp?.close()]);
    },
  };
}

/** The daemon's main: run by its bundle (dist/cli-bundle/cloud-daemon.cjs) or as this module (from the sources). */
export async function runCloudDaemon(configFile: string): Promise<void> {
  let cloud: RunningCloud;
  try {
    const config = parseCloudConfig(
      JSON.parse(
        (await readRegularFile(configFile, { what: 'the cloud config', maxBytes: SIZE_LIMITS.nodeFile })).toString(
          'utf8',
        ),
      ),
    );
    const token = (
      await readRegularFile(config.controlTokenFile, { what: 'the control token', maxBytes: SIZE_LIMITS.nodeFile })
    )
      .toString('utf8')
      .trim();
    cloud = await startCloud(config, token);
    console.log(
      `${new Date().toISOString()} cloud daemon up on ${config.prefix}.1 (metadata :${config.metadataPort}, load balancer :${config.loadBalancerPorts.join(',')})`,
    );
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    console.error(`${new Date().toISOString()} cloud daemon failed: ${e.message}`);
    reportStartup({ type: 'error', message: e.message, code: e.code });
    process.exitCode = 1;
    return;
  }
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      console.log(`${new Date().toISOString()} cloud daemon stopping (${sig})`);
      void cloud.close().then(() => process.exit(0));
    });
  }
  reportStartup({ type: 'ready' });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void runCloudDaemon(process.argv[2] ?? '');
