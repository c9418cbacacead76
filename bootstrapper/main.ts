/**
 * The bootstrapper's entry, the program every node runs (dist/bootstrapper/main.js). It learns where it runs
 * (./boot-config.ts: kernel command line or the image's boot config, else the local launcher's environment), loads
 * that provider's node platform (providers/<name>/node-platform.ts: metadata, TPM path, the variant's issuer, state
 * disk, Kubernetes backend, join-service validator collaborators), asks it who the node is (which also confirms the
 * cloud), wires the rest the same way on every platform and runs runBootstrapper. What the node keeps (the join
 * service's files, Kubernetes work files) lives on the state disk, below its mount point. Logs JSON lines to stdout, never a
 * secret. On an image that ships sshd, the emergency SSH server starts once the node is in its cluster
 * (./emergency-ssh.ts). SIGTERM/SIGINT close the servers, the TPM connection and the disk, then exit 0.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UserError } from '../lib/errors.js';
import { createLogger, type Logger } from '../lib/logging/index.js';
import { TpmClient } from '../lib/tpm/client.js';
import type { NodePlatform } from '../providers/contract.js';
import { loadProvider } from '../providers/registry.js';
import { readBootConfig, type BootConfigSources } from './boot-config.js';
import { runBootstrapper, type Bootstrapper, type BootstrapperDeps } from './bootstrapper.js';
import { describeError } from './errors.js';
import type { BackendOptions } from './kubernetes/types.js';
import { loadBackend } from './kubernetes/load-backend.js';
import { KubernetesStoreHost, type KubernetesStoreHostOptions } from './kubernetes-store-host.js';
import { LogTail } from './log-tail.js';
import { EmergencySshServer, imageSshd } from './emergency-ssh.js';
import { openStateDisk } from './state-disk.js';
import { EtcdMember, type EtcdMemberOptions } from './etcd-member.js';
import type { ClusterStoreHost } from './store-host.js';
import { systemClock } from '../lib/clock.js';
import type { StateDisk } from './state-disk/types.js';

/** The folder of the state disk where a control plane's etcd member keeps its data and certificates. */
export const ETCD_DIR = 'etcd';

export async function main(): Promise<void> {
  await runNodeProgram((context) => startNode(context));
}

/** What a node program hands its start function: the logger, the log tail and the list of close steps. */
export type NodeProgramContext = Pick<StartNodeOptions, 'logger' | 'tail' | 'cleanup'>;

/**
 * Runs a node program around `start`: JSON log lines on stdout (their tail kept for init failures), SIGTERM/SIGINT
 * run the close steps in reverse and exit 0; a start that fails logs one line (reason and hint, no stack) and exits 1.
 */
export async function runNodeProgram(start: (context: NodeProgramContext) => Promise<Bootstrapper>): Promise<void> {
  const tail = new LogTail();
  const logger = createLogger(
    (line) => {
      process.stdout.write(`${line}\n`);
      tail.sink(line);
    },
    { component: 'bootstrapper' },
  );
  const cleanup: Array<() => Promise<void> | void> = [];
  const shutdown = async (code: number) => {
    for (const step of cleanup.reverse()) {
      try {
        await step();
      } catch (err) {
        logger.warn('shutdown step failed', { reason: describeError(err) });
      }
    }
    process.exit(code);
  };
  try {
    const bootstrapper = await start({ logger, tail, cleanup });
    let stopping = false;
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      // Handled for good, not once: a second signal must not end the process in the middle of its orderly shutdown
      // (an etcd member still running on a state disk about to be unmounted).
      process.on(signal, () => {
        if (stopping) return;
        stopping = true;
        logger.info('shutting down', { signal, state: bootstrapper.status.get().state });
        void shutdown(0);
      });
    }
  } catch (err) {
    logger.error('the bootstrapper cannot start', {
      reason: describeError(err),
      hint: (err as { hint?: string }).hint,
    });
    await shutdown(1);
  }
}

export interface StartNodeOptions {
  logger: Logger;
  tail: LogTail;
  /** Close steps, run in reverse order at shutdown. */
  cleanup: Array<() => Promise<void> | void>;
  boot?: BootConfigSources;
  /** The platform instead of the boot config's provider's (tests). */
  platform?: NodePlatform;
  /** Opens the state disk instead of bootstrapper/state-disk's openStateDisk (tests: a LUKS disk without device-mapper). */
  openStateDisk?: (platform: NodePlatform) => Promise<StateDisk>;
  /** Options of the Kubernetes backend (tests: kubeadm's folders and PATH below the node's folder). */
  backend?: Omit<Partial<BackendOptions>, 'workDir'>;
  /** Overrides of runBootstrapper's collaborators (ports, retry, ...). */
  overrides?: Partial<Pick<BootstrapperDeps, 'ports' | 'retry' | 'stepTimeoutMs' | 'host'>>;
  /** false: never start the image's SSH server (tests that run the node program on a machine with the marker). */
  emergencySsh?: false;
}

/** Loads the platform the node boots on and starts the bootstrapper on it. */
export async function startNode(options: StartNodeOptions): Promise<Bootstrapper> {
  const { logger, tail, cleanup } = options;
  const platform = options.platform ?? (await loadPlatform(options.boot));
  const node = await platform.identity();
  await fs.mkdir(platform.nodeDir, { recursive: true, mode: 0o700 });
  logger.info('node platform', {
    provider: platform.provider,
    variant: platform.variant,
    node: node.name,
    role: node.role,
    tpm: platform.tpmPath,
  });
  const tpm = await TpmClient.connect(platform.tpmPath);
  cleanup.push(() => tpm.close());
  const issuer = await platform.issuer(tpm);
  const stateDisk = await (options.openStateDisk ?? ((p) => openStateDisk(p.stateDisk)))(platform);
  cleanup.push(() => stateDisk.close());
  const bootstrapper = await runBootstrapper({
    node,
    tpm,
    issuer,
    metadata: platform.metadata,
    stateDisk,
    backend: await loadBackend(platform.kubernetesBackend, {
      ...(platform.cloudController ? { cloudController: () => platform.cloudController!() } : {}),
      ...options.backend,
      workDir: path.join(stateDisk.mountPoint, 'kubernetes'),
    }),
    joinService: {
      validatorDeps: { ...(await platform.validatorDeps()) },
      // The addresses a kubelet certificate may name: the provider's view of the attested instance.
      instanceAddresses: async (name) => {
        const instance = (await platform.metadata.peers()).find((peer) => peer.name === name);
        return instance && [instance.vpcIp];
      },
    },
    store: createStoreHost(platform.kubernetesBackend, {
      etcd: {
        name: node.name,
        ip: node.ip,
        dir: path.join(stateDisk.mountPoint, ETCD_DIR),
        logFile: path.join(platform.nodeDir, 'etcd.log'),
        clock: systemClock,
        logger: logger.child({ component: 'cluster-store' }),
      },
      kubernetes: { adminConfPath: options.backend?.adminConfPath },
    }),
    logger,
    logTail: () => tail.snapshot(),
    imageVersion: platform.imageVersion,
    ...options.overrides,
  });
  cleanup.push(() => bootstrapper.close());
  // The image's emergency SSH server, once the node is in its cluster (./emergency-ssh.ts).
  const sshd = options.emergencySsh === false ? undefined : await imageSshd();
  if (sshd) {
    const ssh = new EmergencySshServer({
      sshdBinary: sshd,
      runDir: '/run/constellation-ssh',
      privsepDir: '/run/sshd',
      mountPoint: stateDisk.mountPoint,
      listenAddress: node.ip,
      logger,
    });
    cleanup.push(() => ssh.close());
    void bootstrapper.status
      .waitFor('initialized', 'joined')
      .then(() => ssh.start())
      .catch((err: unknown) => logger.warn('the emergency SSH server did not start', { reason: describeError(err) }));
  }
  return bootstrapper;
}

/**
 * The store host of a node with this Kubernetes backend: an etcd member (`none`), the Kubernetes API through the
 * admin kubeconfig the kubeadm backend writes (`kubeadm`).
 */
export function createStoreHost(
  backend: 'none' | 'kubeadm',
  options: { etcd: EtcdMemberOptions; kubernetes: KubernetesStoreHostOptions },
): ClusterStoreHost {
  return backend === 'none' ? new EtcdMember(options.etcd) : new KubernetesStoreHost(options.kubernetes);
}

async function loadPlatform(sources?: BootConfigSources): Promise<NodePlatform> {
  const boot = await readBootConfig(sources);
  const provider = await loadProvider(boot.provider);
  if (!provider.nodePlatform)
    throw new UserError(`Provider "${boot.provider}" has no node side: it cannot run the node program.`);
  if (!provider.attestationVariants.includes(boot.options.variant)) {
    throw new UserError(`Provider "${boot.provider}" nodes cannot attest as ${boot.options.variant}.`, {
      hint: `Its variants: ${provider.attestationVariants.join(', ')}.`,
    });
  }
  return provider.nodePlatform(boot.options);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) void main();
