/**
 * The bootstrapper daemon (docs/design.md#nodes), with every collaborator a parameter so tests run whole nodes in-process.
 * At start it serves the verify service (every node), the init server (control-plane nodes of a cluster whose
 * metadata still carries the init-secret hash, i.e. not yet initialized) and, when its state
 * disk is already formatted (a reboot), the recovery server; in parallel its join client asks for a join ticket
 * (fresh disk) or a rejoin ticket (formatted disk). The node lock decides between init, join and recovery, and the
 * status tracker's table which state may follow which (docs/bootstrapper.md#states).
 * A control-plane node, once in the cluster, follows in-place Kubernetes upgrades (./kubernetes-upgrade.ts).
 */
import type { ServerDuplexStream, ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js';
import {
  NODE_SERVICE_LIMITS,
  startAttestedServer,
  type AttestedServer,
  type ExchangeLimits,
} from '../lib/atls/index.js';
import type { Issuer } from '../lib/attestation/types.js';
import { InitService, type InitRequest, type InitResponse } from '../proto/gen/constellation/init.js';
import { RecoveryService, type RecoverRequest, type RecoverResponse } from '../proto/gen/constellation/recover.js';
import { VerifyService } from '../proto/gen/constellation/verify.js';
import type { NodeMetadata } from '../providers/contract.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { rateLimitedLogger, type Logger } from '../lib/logging/index.js';
import type { KubernetesBackend } from './kubernetes/backend.js';
import type { NodeIdentity, NodeRoleOptions } from './node-role.js';
import type { StateDisk } from './state-disk/types.js';
import type { ClusterStoreHost } from './store-host.js';
import { describeError } from './errors.js';
import { InitServer } from './init-server.js';
import { KubernetesUpgradeAgent } from './kubernetes-upgrade.js';
import { JoinClient, type RetryPolicy } from './join-client.js';
import { NodeLock } from './node-lock.js';
import { NodeSetup, type BootstrapperTpm, type JoinServiceSettings } from './node-setup.js';
import { NodeStatusTracker } from './node-status.js';
import { RecoveryServer } from './recovery-server.js';
import { createVerifyService } from './verify-server.js';
import { IMAGE_PCRS, imageMeasurementsDigest } from '../lib/attestation/measurements.js';
import { cliVersion } from '../lib/config/package-info.js';
import type { TpmClient } from '../lib/tpm/client.js';
import { TPM_ALG } from '../lib/tpm/constants.js';

/** Ports of the node's services (docs/design.md#attested-channels); tests pass 0 for ephemeral ports where nothing else must find them. */
export interface ServicePorts {
  init: number;
  verify: number;
  /** Where this node's join service listens AND where the join client looks for other nodes' join services. */
  join: number;
  recovery: number;
}

export const DEFAULT_PORTS: ServicePorts = { init: 9000, verify: 30081, join: 30090, recovery: 9999 };

export interface BootstrapperDeps {
  node: NodeIdentity;
  /** The node's TPM connection (shared with the issuer: swtpm serves one connection). */
  tpm: BootstrapperTpm & Pick<TpmClient, 'pcrRead'>;
  issuer: Issuer;
  metadata: NodeMetadata;
  stateDisk: StateDisk;
  backend: KubernetesBackend;
  joinService: JoinServiceSettings;
  /** This node's part of the cluster store (used on control-plane nodes: etcd member, or the Kubernetes API). */
  store: ClusterStoreHost;
  logger: Logger;
  /** The tail of the node's log for init failures; default: nothing. */
  logTail?: () => Uint8Array;
  clock?: Clock;
  /** Address the servers bind; default the node's IP. */
  host?: string;
  ports?: Partial<ServicePorts>;
  retry?: RetryPolicy;
  /** Longest wait for one message of a peer. */
  stepTimeoutMs?: number;
  /** The version of the image the node booted ("local" for the local provider's current build); reported by GetStatus. */
  imageVersion?: string;
  /** Bounds of the init, recovery and verify servers' calls; default NODE_SERVICE_LIMITS. */
  limits?: ExchangeLimits;
}

export interface Bootstrapper {
  status: NodeStatusTracker;
  lock: NodeLock;
  /** The bound ports (init and recovery only where they run). */
  ports: { verify: number; init?: number; recovery?: number };
  /** Stops the join client and every server of the node (its join service too). The TPM and disk stay open. */
  close(): Promise<void>;
}

/** How long the node's servers let running calls finish when the node shuts down. */
const SHUTDOWN_GRACE_MS = 2_000;

export async function runBootstrapper(deps: BootstrapperDeps): Promise<Bootstrapper> {
  const { node } = deps;
  // Anyone who reaches the node's ports can provoke warnings (a refused call, a stream that ended early): repeats
  // are collapsed, so that a flood of them neither fills the log nor buries what matters.
  const logger = rateLimitedLogger(deps.logger);
  const clock = deps.clock ?? systemClock;
  const ports = { ...DEFAULT_PORTS, ...deps.ports };
  const host = deps.host ?? node.ip;
  const lock = new NodeLock();
  const status = new NodeStatusTracker(node.name, node.role, {
    lock,
    logger,
    software: {
      attestationVariant: deps.issuer.variant,
      imageVersion: deps.imageVersion ?? '',
      imageMeasurementsDigest: await bootedImageDigest(deps.tpm),
      microserviceVersion: `v${cliVersion()}`,
    },
  });
  const setup = new NodeSetup({
    tpm: deps.tpm,
    stateDisk: deps.stateDisk,
    logger,
    clock,
    joinService: {
      ...deps.joinService,
      // The join service (after init, or on a joined control-plane node) registers its tokens through the backend.
      tokenSink:
        deps.joinService.tokenSink ??
        deps.backend.tokenSink(logger.child({ component: `kubernetes-${deps.backend.name}` })),
      host,
      port: ports.join,
    },
    store: deps.store,
    lock,
  });
  const servers: AttestedServer[] = [];
  const serve = (
    what: string,
    service: ServiceDefinition,
    implementation: UntypedServiceImplementation,
    port: number,
  ) =>
    startAttestedServer({
      what,
      service,
      implementation,
      host,
      port,
      shutdownGraceMs: SHUTDOWN_GRACE_MS,
      limits: deps.limits ?? NODE_SERVICE_LIMITS,
      logger,
    });
  const started: Bootstrapper['ports'] = { verify: 0 };
  const stop = new AbortController();
  let joining: Promise<void> = Promise.resolve();
  let closed = false;
  const upgrades =
    node.role === 'control-plane' ? followKubernetesUpgrades(deps, status, setup, logger, clock) : undefined;

  const close = async () => {
    closed = true;
    stop.abort();
    await joining;
    await upgrades?.close();
    await Promise.all(servers.map((s) => s.close()));
    await setup.close();
  };

  try {
    const verify = await serve('verify service', VerifyService, createVerifyService(deps.issuer, status), ports.verify);
    servers.push(verify);
    started.verify = verify.port;

    const rebooted = await deps.stateDisk.isFormatted();
    const common: NodeRoleOptions = {
      node,
      issuer: deps.issuer,
      lock,
      status,
      setup,
      stateDisk: deps.stateDisk,
      logger,
      stepTimeoutMs: deps.stepTimeoutMs,
    };
    if (node.role === 'control-plane' && (await initializedCluster(deps.metadata, logger))) {
      logger.info('the cluster is initialized (the metadata carries no init-secret hash): this node serves no Init');
    } else if (node.role === 'control-plane') {
      const init = new InitServer({
        ...common,
        metadata: deps.metadata,
        backend: deps.backend,
        clock,
        imageVersion: deps.imageVersion,
        logTail: deps.logTail ?? (() => new Uint8Array(0)),
      });
      const server = await serve(
        'init server',
        InitService,
        {
          init: (call: ServerDuplexStream<InitRequest, InitResponse>) => void init.handle(call),
        },
        ports.init,
      );
      servers.push(server);
      started.init = server.port;
    }
    if (rebooted) {
      const recovery = new RecoveryServer(common);
      const server = await serve(
        'recovery server',
        RecoveryService,
        {
          recover: (call: ServerDuplexStream<RecoverRequest, RecoverResponse>) => void recovery.handle(call),
        },
        ports.recovery,
      );
      servers.push(server);
      started.recovery = server.port;
      // Back in the cluster (rejoined or recovered), the node has nothing to recover: `recover` stops finding it.
      // Not at the lock's commit: the recover call that committed it is still resuming the node (etcd member, join
      // service: seconds on a loaded VM) and must receive its RecoverDone; closing at the commit cut that call off
      // after the grace period, and the CLI had to find out from the node's status (docs/workflows/recovery.md).
      // Until then a second recover call is refused by the node lock.
      void status.waitFor('joined').then(() => server.close());
    }

    const kind = rebooted ? 'rejoin' : 'join';
    // A control plane needs its store's client at init, join or rejoin; until then it waits for a peer: load it now.
    if (node.role === 'control-plane') deps.store.preload?.();
    logger.info('bootstrapper started', {
      node: node.name,
      role: node.role,
      address: node.ip,
      diskUuid: deps.stateDisk.uuid,
      mode: kind,
      ports: started,
    });
    const join = new JoinClient({
      ...common,
      metadata: deps.metadata,
      backend: deps.backend,
      joinServicePort: ports.join,
      retry: deps.retry,
    });
    // Whoever commits the lock (init, recovery, or the join client itself) ends the search for a join service.
    lock.onCommitted(() => stop.abort());
    joining = join.run(kind, stop.signal).catch((err: unknown) => {
      logger.error('the join client stopped', { reason: describeError(err) });
      // Shown only while no owner holds the node: an owner's own state says more.
      if (!lock.locked) status.set('failed', { reason: describeError(err) });
    });
    // In the cluster (initialized, joined, rejoined or recovered): follow the control planes' Kubernetes upgrades.
    void status.waitFor('initialized', 'joined').then(() => !closed && upgrades?.start());
  } catch (err) {
    await close();
    throw err;
  }
  return { status, lock, ports: started, close };
}

/**
 * Whether the provider says the cluster is initialized: its metadata no longer carries the init-secret hash. A node
 * added then never serves Init. Metadata that cannot be read says nothing: the init server starts, and checks the
 * hash again on every call (an empty one refuses all).
 */
async function initializedCluster(metadata: NodeMetadata, logger: Logger): Promise<boolean> {
  try {
    return (await metadata.initSecretHash()) === '';
  } catch (err) {
    logger.warn(
      'the init-secret hash cannot be read from the metadata; the init server starts and checks it on every call',
      { reason: describeError(err) },
    );
    return false;
  }
}

/** A control plane's follower of in-place Kubernetes upgrades, with its own client of the cluster store. */
function followKubernetesUpgrades(
  deps: BootstrapperDeps,
  status: NodeStatusTracker,
  setup: NodeSetup,
  logger: Logger,
  clock: Clock,
): KubernetesUpgradeAgent {
  return new KubernetesUpgradeAgent({
    nodeName: deps.node.name,
    openStore: () => setup.openStore(),
    backend: deps.backend,
    status,
    keepVersion: (version) => setup.recordKubernetesVersion(version),
    logger: logger.child({ component: 'kubernetes-upgrade' }),
    clock,
  });
}

/** The digest of the image PCRs (SHA-256 bank) as the launcher measured them before this program started. */
async function bootedImageDigest(tpm: BootstrapperTpm & Pick<TpmClient, 'pcrRead'>): Promise<string> {
  const banks = await tpm.pcrBanks();
  if (!banks.some((b) => b.hashAlg === TPM_ALG.SHA256)) return '';
  return imageMeasurementsDigest(await tpm.pcrRead(TPM_ALG.SHA256, [...IMAGE_PCRS]));
}
