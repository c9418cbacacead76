/**
 * The init server (docs/design.md#attested-channels, docs/design.md#nodes; port 9000, control-plane nodes): the CLI verifies this node's attestation
 * and seals it the cluster's secrets; the node checks the init secret against the bcrypt hash from its
 * metadata, takes the node lock, derives the keys (and from the init secret the join-service identity key, which
 * the cluster store keeps instead of the secret), extends PCR 15, formats its state disk, makes the cluster
 * PKI, writes and starts the join service, brings up the Kubernetes backend, streams Progress, and seals the
 * InitResult back to the CLI (or sends a Failure with the tail of its log).
 *
 * Retrying is safe: an Init carrying the same master secret and init secret as the one this node took (a CLI
 * killed mid-init runs init again) joins the running attempt or gets the same InitResult, and one whose first
 * attempt failed runs the (idempotent) steps again. Any other Init after the lock is refused. Concurrent Inits
 * share one admission (the check of the disk and the taking of the node lock): the first with the right init secret
 * takes the lock for all, and the others wait for it and share its attempt, as a retry would.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { AttestationConfigRecord } from '../lib/cluster-store/types.js';
import type { VariantConfig } from '../lib/attestation/types.js';
import { decodeMessage, initServerAdapter } from '../lib/atls/index.js';
import { UserError } from '../lib/errors.js';
import {
  deriveClusterId,
  deriveJoinServiceKeySeed,
  deriveMeasurementSecret,
  deriveStateDiskKey,
  MEASUREMENT_SALT_LENGTH,
  MIN_MASTER_KEY_LENGTH,
  MIN_MASTER_SALT_LENGTH,
  type MasterSecret,
} from '../lib/kms/index.js';
import { createAdminKubeconfig, createClusterPki, loadClusterPki, type PkiFiles } from '../lib/pki/cluster-pki.js';
import { InitResult, InitSecrets, type InitRequest, type InitResponse } from '../proto/gen/constellation/init.js';
import type { NodeMetadata } from '../providers/contract.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logging/index.js';
import type { KubernetesBackend } from './kubernetes/backend.js';
import type { NodeRoleOptions } from './node-role.js';
import type { LockToken } from './node-lock.js';
import type { StoreCredentials } from './store-host.js';
import { withPort } from '../lib/addresses.js';
import { serveCliCall } from './cli-call.js';
import { describeError } from './errors.js';
import { initSecretPassword } from './init-secret.js';
import {
  deriveSshCa,
  signHostCertificate,
  SSH_CLOCK_SLACK_SECONDS,
  sshCaPublicKeyLine,
} from '../lib/ssh/certificate.js';
import { NODE_SSH_CA_FILE } from '../lib/ssh/sshd-config.js';

export const API_SERVER_PORT = 6443;
const DEFAULT_SERVICE_CIDR = '10.96.0.0/12';
/** The pod network when the CLI names none: upstream's Cilium pool. */
export const DEFAULT_POD_CIDR = '10.244.0.0/16';
const DEFAULT_CLUSTER_NAME = 'constellation';

/**
 * The Progress steps an init streams to the CLI, in order (docs/bootstrapper.md#progress-steps lists each): `init`
 * only when an init with the same secrets is already running and this call waits for it.
 */
export const INIT_STEPS = [
  'init',
  'keys',
  'pcr15',
  'state-disk',
  'pki',
  'kubernetes',
  'cluster-store',
  'join-service',
  'done',
] as const;
export type InitStep = (typeof INIT_STEPS)[number];

export type ProgressListener = (step: InitStep, message: string) => void;

export interface InitServerOptions extends NodeRoleOptions {
  metadata: NodeMetadata;
  backend: KubernetesBackend;
  clock: Clock;
  /** The version of the image this node runs; recorded in the cluster store as the cluster's. */
  imageVersion?: string;
  /** The tail of this node's log, sent with a Failure. */
  logTail: () => Uint8Array;
}

/** InitSecrets, checked. */
interface CheckedInitSecrets {
  master: MasterSecret;
  initSecret: Uint8Array;
  measurementSalt: Uint8Array;
  kubernetesVersion: string;
  clusterName: string;
  apiServerCertSans: string[];
  serviceCidr: string;
  podCidr: string;
  nodeCidr?: string;
  attestation: AttestationConfigRecord;
}

interface InitAttempt {
  fingerprint: Buffer;
  /** The node lock, held by init for this attempt (and its retries). */
  token: LockToken;
  /** The join-service identity key's seed, derived from the init secret that was checked. */
  joinServiceKey: Uint8Array;
  running?: Promise<InitResult>;
  result?: InitResult;
}

export class InitServer {
  private attempt: InitAttempt | undefined;
  /** The one admission under way: the disk check and the lock, shared by Inits that passed the secret check meanwhile. */
  private admission: Promise<InitAttempt> | undefined;
  private readonly listeners = new Set<ProgressListener>();
  private pki: PkiFiles | undefined;
  private storeCredentials: StoreCredentials | undefined;
  private adminKubeconfig: string | undefined;
  private readonly logger: Logger;

  constructor(private readonly options: InitServerOptions) {
    this.logger = options.logger.child({ component: 'init' });
  }

  /** The gRPC handler of Init.Init. Never throws: every outcome is logged and, where possible, told to the CLI. */
  handle(call: ServerDuplexStream<InitRequest, InitResponse>): Promise<void> {
    const { issuer, stepTimeoutMs, logTail } = this.options;
    // The node's log goes only to a caller that proved it holds the init secret: anyone else reaching port 9000
    // (through the load balancer) learns nothing about the node from a refusal.
    let proved = false;
    const failureLog = () => (proved ? logTail() : new Uint8Array(0));
    const options = {
      purpose: 'init' as const,
      issuer,
      logger: this.logger,
      stepTimeoutMs,
      failureMessage: 'init failed',
      failureLog,
    };
    return serveCliCall(call, initServerAdapter, options, async (session, peer) => {
      this.logger.info('init secrets received', { peer });
      const progress: ProgressListener = (step, message) => {
        try {
          session.channel.send({ kind: 'progress', value: { step, message } });
        } catch {
          // The CLI went away; init goes on, and a re-run of init picks up the result.
        }
      };
      const result = await this.initialize(
        decodeMessage(InitSecrets, session.secrets, 'The init secrets'),
        progress,
        () => (proved = true),
      );
      session.channel.send({
        kind: 'sealed',
        value: { jwe: await session.sealToVerifier(InitResult.encode(result).finish()) },
      });
      session.channel.end();
      this.logger.info('init result sent', { peer });
    });
  }

  /**
   * Initializes the cluster on this node with `secrets` (already received over the attested channel), calling
   * `onProgress` for each step, and `onProved` once the secrets are known to carry the right init secret. A
   * UserError says why it was refused or what failed.
   */
  async initialize(
    secrets: InitSecrets,
    onProgress: ProgressListener = () => {},
    onProved: () => void = () => {},
  ): Promise<InitResult> {
    const checked = checkInitSecrets(secrets);
    const fingerprint = fingerprintOf(checked);
    if (!this.attempt) {
      const joinServiceKey = await this.checkInitSecret(checked.initSecret);
      // Another Init may have been admitted, or begun its admission, while bcrypt ran: this one shares its outcome.
      if (!this.attempt) {
        this.admission ??= this.admit(fingerprint, joinServiceKey).finally(() => (this.admission = undefined));
        await this.admission;
      }
    }
    const attempt = this.attempt!;
    if (!timingSafeEqual(attempt.fingerprint, fingerprint)) {
      throw new UserError(
        'This node is already initialized (or being initialized) with another master secret or init secret.',
        {
          hint: 'Run init with the master secret of the cluster this node belongs to, or initialize a new cluster on new nodes.',
        },
      );
    }
    onProved();
    if (attempt.result) {
      onProgress('done', 'this node was already initialized with these secrets; sending the same result again');
      return attempt.result;
    }
    this.listeners.add(onProgress);
    try {
      if (attempt.running)
        onProgress('init', 'an init with these secrets is already running on this node; waiting for it');
      attempt.running ??= this.run(checked, attempt).then(
        (result) => {
          attempt.result = result;
          attempt.running = undefined;
          return result;
        },
        (err: unknown) => {
          attempt.running = undefined;
          throw err;
        },
      );
      return await attempt.running;
    } finally {
      this.listeners.delete(onProgress);
    }
  }

  /**
   * The seed of the join-service identity key when `initSecret` is the one behind the metadata's hash; a UserError
   * otherwise. A cluster that is initialized has no hash in the metadata any more, so no Init passes here then.
   */
  private async checkInitSecret(initSecret: Uint8Array): Promise<Uint8Array> {
    const password = await initSecretPassword(initSecret, await this.options.metadata.initSecretHash());
    if (password !== undefined) return deriveJoinServiceKeySeed(password);
    this.logger.warn('init refused: wrong init secret');
    throw new UserError('The init secret is wrong: it does not match the hash this node got from its provider.', {
      hint: 'Run init from the workspace that created this cluster (its constellation-state.yaml holds the init secret).',
    });
  }

  /** Takes the node lock for init after checking that the node belongs to no cluster; the attempt, or a UserError. */
  private async admit(fingerprint: Buffer, joinServiceKey: Uint8Array): Promise<InitAttempt> {
    const { lock } = this.options;
    if (lock.owner === 'join' || lock.owner === 'recover') {
      throw new UserError(
        `This node has joined (or is joining) a cluster${lock.owner === 'recover' ? ' through `constellation recover`' : ''}, so it cannot be initialized.`,
        {
          hint: 'Initialize a cluster through a control-plane node that belongs to none.',
        },
      );
    }
    if (await this.options.stateDisk.isFormatted()) {
      throw new UserError(
        "This node's state disk is already formatted: the node belonged to a cluster before it rebooted.",
        {
          hint: 'It rejoins that cluster by itself; if no control-plane node of it runs any more, use `constellation recover`.',
        },
      );
    }
    const token = lock.tryLock('init');
    if (!token) throw new UserError(`This node was taken by ${lock.owner} meanwhile, so it cannot be initialized.`);
    // Init never gives the node back: an attempt that fails is retried with the same secrets, under the same lock.
    lock.commit(token);
    this.attempt = { fingerprint, joinServiceKey, token };
    return this.attempt;
  }

  private emit(step: InitStep, message: string): void {
    this.logger.info(message, { step });
    for (const listener of this.listeners) listener(step, message);
  }

  /** Whether the provider lists no other control plane than this node; metadata that cannot be read says no. */
  private async onlyControlPlane(): Promise<boolean> {
    const { metadata, node } = this.options;
    try {
      return (await metadata.peers()).every((peer) => peer.role !== 'control-plane' || peer.name === node.name);
    } catch {
      return false;
    }
  }

  /** The steps after the lock; each is safe to run again when an earlier attempt failed. */
  private async run(secrets: CheckedInitSecrets, attempt: InitAttempt): Promise<InitResult> {
    const { node, setup, stateDisk, status, clock } = this.options;
    const { token, joinServiceKey } = attempt;
    status.attested('accepted', 'the CLI (init)', { now: clock() });
    status.set('initializing', {}, token);
    try {
      // Asked now, used when the cluster store starts below (ClusterStoreHost.create's `alone`).
      const alone = this.onlyControlPlane();
      const measurementSecret = deriveMeasurementSecret(secrets.master);
      const clusterId = deriveClusterId(measurementSecret, secrets.measurementSalt);
      this.emit('keys', `derived the cluster keys; clusterID ${Buffer.from(clusterId).toString('hex')}`);

      await setup.extendClusterPcr(token, clusterId);
      this.emit('pcr15', 'extended PCR 15 with the clusterID');

      const how = await setup.openStateDisk(token, deriveStateDiskKey(secrets.master, stateDisk.uuid));
      // The cluster store starts now, on the open disk: a new etcd member's first election waits up to an election
      // timeout, and that wait runs while this node writes its files and brings up Kubernetes below.
      this.pki ??= createClusterPki({ clock, clusterName: secrets.clusterName });
      const pki = loadClusterPki(this.pki);
      const storeCreated = alone.then((only) => setup.createStore(token, pki, { alone: only }));
      storeCreated.catch(() => undefined); // Awaited below; a step that fails before must not leave it unhandled.
      // The emergency SSH CA the node's SSH server trusts (docs/workflows/emergency-ssh.md), from the master secret.
      // The node certifies its own host key with that CA (as upstream's init server), for its address and name.
      const sshCa = deriveSshCa(secrets.master);
      // Files of their own, written together (each is atomic: its own temporary file, fsync and rename).
      await Promise.all([
        setup.writeClusterRecord(token, {
          origin: 'init',
          role: node.role,
          clusterId: Buffer.from(clusterId).toString('hex'),
          measurementSalt: Buffer.from(secrets.measurementSalt).toString('hex'),
          kubernetesVersion: secrets.kubernetesVersion,
        }),
        how === 'formatted' && setup.recordClusterEntry(token, 'init'),
        setup.writeNodeFile(token, NODE_SSH_CA_FILE, Buffer.from(sshCaPublicKeyLine(sshCa.publicKey))),
        setup.writeSshHostIdentity(
          token,
          Buffer.from(
            signHostCertificate(
              sshCa,
              setup.sshHostPublicKey(),
              [node.ip, node.name],
              Math.floor(clock().getTime() / 1000) - SSH_CLOCK_SLACK_SECONDS,
            ),
          ),
        ),
      ]);
      status.setKubernetesVersion(secrets.kubernetesVersion);
      this.emit('state-disk', `${how} the state disk ${stateDisk.uuid} with its derived key`);
      this.emit('pki', 'created the cluster PKI (CA, front-proxy CA, etcd CA, service-account key)');

      const apiServerEndpoint = withPort(await this.options.metadata.loadBalancerEndpoint(), API_SERVER_PORT);
      this.adminKubeconfig ??= await createAdminKubeconfig({
        pki,
        clusterName: secrets.clusterName,
        server: `https://${apiServerEndpoint}`,
        clock,
      });
      const kubernetes = await this.options.backend.init({
        nodeName: node.name,
        nodeIp: node.ip,
        clusterName: secrets.clusterName,
        kubernetesVersion: secrets.kubernetesVersion,
        apiServerEndpoint,
        certSANs: secrets.apiServerCertSans,
        serviceCIDR: secrets.serviceCidr,
        podCIDR: secrets.podCidr,
        ...(secrets.nodeCidr ? { nodeCIDR: secrets.nodeCidr } : {}),
        ...(node.providerId ? { providerId: node.providerId } : {}),
        pkiFiles: Object.fromEntries(Object.entries(this.pki).map(([name, text]) => [name, Buffer.from(text)])),
        adminKubeconfig: Buffer.from(this.adminKubeconfig),
        log: this.logger.child({ component: `kubernetes-${this.options.backend.name}` }),
      });
      this.emit('kubernetes', kubernetes.message);

      await storeCreated;
      const store = await setup.openStoreAsAdmin(token, pki);
      try {
        await store.writeJoinConfig({
          attestation: secrets.attestation,
          masterSecret: secrets.master,
          measurementSalt: secrets.measurementSalt,
          joinServiceKey,
          cluster: {
            apiServerEndpoint,
            kubernetesVersion: secrets.kubernetesVersion,
            imageVersion: this.options.imageVersion,
          },
          pki: this.pki,
        });
        const now = clock().toISOString();
        // Two keys of their own: one round of consensus for both.
        await Promise.all([
          store.claimDisk(stateDisk.uuid, node.name),
          store.putNode({
            name: node.name,
            role: node.role,
            diskUuid: stateDisk.uuid,
            joinedAt: now,
            lastEntry: 'init',
            lastEntryAt: now,
          }),
        ]);
      } finally {
        await store.close();
      }
      this.storeCredentials ??= await setup.storeCredentials(token, pki);
      this.emit('cluster-store', 'created the cluster store and wrote the join configuration to it');
      const joinService = await setup.startJoinService(token);
      this.emit('join-service', `join service listening on ${node.ip}:${joinService.port}`);

      status.set('initialized', { clusterId }, token);
      this.emit('done', 'the cluster is initialized');
      return {
        kubeconfig: Buffer.from(kubernetes.kubeconfig),
        clusterId: Buffer.from(clusterId),
        kubernetesBackend: this.options.backend.name,
        storeCredentials: Buffer.from(JSON.stringify(this.storeCredentials)),
      };
    } catch (err) {
      status.set('failed', { reason: describeError(err) }, token);
      throw err;
    }
  }
}

/** Checks what the CLI sent, before anything is derived or locked. Messages never quote a secret. */
export function checkInitSecrets(secrets: InitSecrets): CheckedInitSecrets {
  const problem = (what: string) =>
    new UserError(`The init request is malformed: ${what}.`, { hint: 'Use a CLI of the same version as the nodes.' });
  if (secrets.masterKey.length < MIN_MASTER_KEY_LENGTH)
    throw problem(
      `the master key has ${secrets.masterKey.length} bytes, at least ${MIN_MASTER_KEY_LENGTH} are required`,
    );
  if (secrets.masterSalt.length < MIN_MASTER_SALT_LENGTH)
    throw problem(
      `the master salt has ${secrets.masterSalt.length} bytes, at least ${MIN_MASTER_SALT_LENGTH} are required`,
    );
  if (secrets.measurementSalt.length !== MEASUREMENT_SALT_LENGTH)
    throw problem(`the measurement salt has ${secrets.measurementSalt.length} bytes, not ${MEASUREMENT_SALT_LENGTH}`);
  if (secrets.initSecret.length === 0) throw problem('it carries no init secret');
  if (!secrets.kubernetesVersion) throw problem('it names no Kubernetes version');
  return {
    master: { key: new Uint8Array(secrets.masterKey), salt: new Uint8Array(secrets.masterSalt) },
    initSecret: new Uint8Array(secrets.initSecret),
    measurementSalt: new Uint8Array(secrets.measurementSalt),
    kubernetesVersion: secrets.kubernetesVersion,
    clusterName: secrets.clusterName || DEFAULT_CLUSTER_NAME,
    apiServerCertSans: secrets.apiServerCertSans,
    serviceCidr: secrets.serviceCidr || DEFAULT_SERVICE_CIDR,
    podCidr: secrets.podCidr || DEFAULT_POD_CIDR,
    ...(secrets.nodeCidr ? { nodeCidr: secrets.nodeCidr } : {}),
    attestation: parseAttestationConfig(secrets.attestationConfig, problem),
  };
}

/**
 * The attestation config the join service starts with: `{"variant", "config": {"measurements", ...}}` (the
 * join service's file format); `{"variant", "measurements", ...}` is accepted too.
 */
function parseAttestationConfig(bytes: Uint8Array, problem: (what: string) => UserError): AttestationConfigRecord {
  if (bytes.length === 0) throw problem('it carries no attestation config');
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw problem('its attestation config is not JSON');
  }
  const value = json as { variant?: unknown; config?: unknown; measurements?: unknown; previous?: unknown };
  if (typeof value !== 'object' || value === null || typeof value.variant !== 'string' || value.variant === '') {
    throw problem('its attestation config names no variant');
  }
  if (typeof value.config === 'object' && value.config !== null) return value as AttestationConfigRecord;
  if (typeof value.measurements === 'object' && value.measurements !== null) {
    const { variant, ...config } = value as { variant: string } & VariantConfig;
    return { variant, config };
  }
  throw problem('its attestation config has no measurements');
}

/** Identifies an init attempt by the secrets it carried (a hash kept in memory, compared in constant time). */
function fingerprintOf(secrets: CheckedInitSecrets): Buffer {
  const hash = createHash('sha256').update('constellation init attempt');
  for (const part of [secrets.master.key, secrets.master.salt, secrets.initSecret, secrets.measurementSalt]) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(part.length);
    hash.update(length).update(part);
  }
  return hash.digest();
}
