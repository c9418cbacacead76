/**
 * The bootstrapper's entry, the program the node launcher starts (dist/bootstrapper/main.js): reads the node's
 * environment, wires the real collaborators (the node's one TPM connection shared by the issuer and PCR 15, the
 * provider's node metadata and AK registry, the gocryptfs state disk, the Kubernetes backend) and runs
 * runBootstrapper. Logs JSON lines to stdout (the launcher sends them to NODE_DIR/node.log), never a secret.
 * SIGTERM/SIGINT close the servers, the TPM connection and the disk, then exit 0.
 * The issuer is the local-vtpm one (the nodes this program runs on are the local provider's); cloud node images
 * would wire their variant's issuer here.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { localInstanceInfo, VARIANT as LOCAL_VTPM } from '../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../lib/attestation/vtpm-issuer.js';
import { createLogger, type Logger } from '../lib/logging/index.js';
import { TpmClient } from '../lib/tpm/client.js';
import { loadProvider } from '../providers/registry.js';
import { runBootstrapper, type Bootstrapper } from './bootstrapper.js';
import { describeError } from './errors.js';
import { createBackend, type BackendOptions } from './kubernetes/backend.js';
import { KubernetesStoreHost, type KubernetesStoreHostOptions } from './kubernetes-store-host.js';
import { LogTail } from './log-tail.js';
import { readNodeEnv, type NodeEnv } from './node-env.js';
import { openGocryptfsStateDisk } from './state-disk.js';
import { EtcdMember, type EtcdMemberOptions } from './etcd-member.js';
import type { ClusterStoreHost } from './store-host.js';
import { systemClock } from '../lib/clock.js';

/** The folder of the state disk where a control plane's etcd member keeps its data and certificates. */
export const ETCD_DIR = 'etcd';

export async function main(): Promise<void> {
  const tail = new LogTail();
  const logger = createLogger((line) => {
    process.stdout.write(`${line}\n`);
    tail.sink(line);
  }, { component: 'bootstrapper' });
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
    const env = readNodeEnv();
    const bootstrapper = await start(env, logger, tail, cleanup);
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        logger.info('shutting down', { signal, state: bootstrapper.status.get().state });
        void shutdown(0);
      });
    }
  } catch (err) {
    logger.error('the bootstrapper cannot start', { reason: describeError(err), hint: (err as { hint?: string }).hint });
    await shutdown(1);
  }
}

async function start(env: NodeEnv, logger: Logger, tail: LogTail, cleanup: Array<() => Promise<void> | void>): Promise<Bootstrapper> {
  const tpm = await TpmClient.connect(env.tpmSocket);
  cleanup.push(() => tpm.close());
  const stateDisk = await openGocryptfsStateDisk({ diskDir: env.stateDisk, mountPoint: env.stateDir });
  cleanup.push(() => stateDisk.close());
  const provider = await loadProvider(env.provider);
  const providerOptions = { metadataUrl: env.metadataUrl, nodeIp: env.ip, localAddress: env.ip };
  const metadata = await provider.nodeMetadata(providerOptions);
  const backendOptions: BackendOptions = { workDir: path.join(stateDisk.mountPoint, 'kubernetes') };
  const bootstrapper = await runBootstrapper({
    node: { name: env.name, ip: env.ip, role: env.role },
    tpm,
    issuer: new VtpmIssuer({ variant: LOCAL_VTPM, tpm, instanceInfo: localInstanceInfo(env.name) }),
    metadata,
    stateDisk,
    backend: createBackend(env.backend, backendOptions),
    joinService: {
      validatorDeps: { ...(await provider.attestationDeps?.(providerOptions)) },
      instanceAddresses: async (name) => {
        const instance = (await metadata.peers()).find((peer) => peer.name === name);
        return instance && [instance.vpcIp];
      },
    },
    store: createStoreHost(env.backend, {
      etcd: {
        name: env.name,
        ip: env.ip,
        dir: path.join(stateDisk.mountPoint, ETCD_DIR),
        logFile: path.join(env.nodeDir, 'etcd.log'),
        clock: systemClock,
        logger: logger.child({ component: 'cluster-store' }),
      },
      kubernetes: { adminConfPath: backendOptions.adminConfPath },
    }),
    logger,
    logTail: () => tail.snapshot(),
    imageVersion: env.imageVersion,
  });
  cleanup.push(() => bootstrapper.close());
  return bootstrapper;
}

/**
 * The store host of a node with this Kubernetes backend: an etcd member (`none`), the Kubernetes API through the
 * admin kubeconfig the kubeadm backend writes (`kubeadm`).
 */
export function createStoreHost(backend: 'none' | 'kubeadm', options: { etcd: EtcdMemberOptions; kubernetes: KubernetesStoreHostOptions }): ClusterStoreHost {
  return backend === 'none' ? new EtcdMember(options.etcd) : new KubernetesStoreHost(options.kubernetes);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) void main();
