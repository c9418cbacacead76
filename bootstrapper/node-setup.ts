/**
 * The steps a node takes once it holds a cluster's secrets, shared by init, join, rejoin and recovery, each
 * safe to repeat (an init retried after a failure runs them again): extend PCR 15 with the clusterID (once per
 * boot), format or unlock the state disk, keep the node's cluster record on the encrypted disk (what a rejoin
 * needs to recompute the clusterID), and on control-plane nodes host a part of the cluster store (./store-host.ts)
 * and a join service reading it. Every step that changes the node requires the node lock's token of its caller
 * (./node-lock.ts): a step called without it, or by an owner that lost the lock, throws and changes nothing; the
 * first step that cannot be undone (extending PCR 15, opening the state disk) commits the lock.
 */
import { createHash } from 'node:crypto';
import { UserError } from '../lib/errors.js';
import { CLUSTER_ID_LENGTH, deriveClusterId, MEASUREMENT_SALT_LENGTH } from '../lib/kms/index.js';
import { TPM_ALG } from '../lib/tpm/constants.js';
import { startJoinService, type JoinServiceHandle } from '../joinservice/server.js';
import type { ClusterStore } from '../lib/cluster-store/types.js';
import type { ClusterPki } from '../lib/pki/cluster-pki.js';
import type { ClusterStoreHost, StoreCredentials } from './store-host.js';
import type { ValidatorDeps } from '../lib/attestation/types.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logging/index.js';
import type { TpmClient } from '../lib/tpm/client.js';
import type { TokenSink } from '../joinservice/bootstrap-token.js';
import type { ValidatorFactory } from '../joinservice/server.js';
import type { StateDisk } from './state-disk/types.js';
import { NodeLockError, type LockToken, type NodeLock } from './node-lock.js';
import type { ParsedPublicKey } from '../lib/ssh/certificate.js';
import { generateSshHostKey, type SshHostKey } from '../lib/ssh/host-key.js';
import { NODE_SSH_HOST_CERT_FILE, NODE_SSH_HOST_KEY_FILE } from '../lib/ssh/sshd-config.js';

/** The PCR that says which cluster a node belongs to (docs/design.md#keys-and-identities). */
export const CLUSTER_PCR = 15;

/** The node's cluster record on its state disk. Not secret on its own, but kept on the encrypted disk anyway. */
export const CLUSTER_RECORD_FILE = 'constellation/cluster.json';

/** One JSON line per time the node came into its cluster (init, join, rejoin, recover), oldest first. */
export const BOOT_HISTORY_FILE = 'constellation/boots.jsonl';

export type ClusterEntry = 'init' | 'join' | 'rejoin' | 'recover';

export interface ClusterRecord {
  /** How the node came into the cluster. */
  origin: 'init' | 'join';
  role: string;
  /** Hex. */
  clusterId: string;
  /** Hex; with the measurement secret (from a rejoin ticket) it gives the clusterID again. */
  measurementSalt: string;
  /** The Kubernetes version the node was initialized or joined with (absent in records of older nodes). */
  kubernetesVersion?: string;
}

/** The TPM operations the bootstrapper needs besides the issuer's (which shares the same connection). */
export type BootstrapperTpm = Pick<TpmClient, 'pcrExtend' | 'pcrBanks'>;

/** What a join service started on this node (after init, or on a control-plane node after joining) needs. */
export interface JoinServiceSettings {
  /** The provider's attestation collaborators (local: the AK registry). */
  validatorDeps: ValidatorDeps;
  /** Default: lib/attestation/registry's createValidator. */
  createValidator?: ValidatorFactory;
  /** Where bootstrap tokens are registered; default: the Kubernetes backend's sink (kubeadm: the API server; none: memory). */
  tokenSink?: TokenSink;
  /** The provider's instance listing: the addresses a kubelet certificate may name when attestation does not say. */
  instanceAddresses?: (nodeName: string) => Promise<string[] | undefined>;
}

const BANK_HASHES: Record<number, string> = { [TPM_ALG.SHA256]: 'sha256', [TPM_ALG.SHA384]: 'sha384' };

export interface NodeSetupOptions {
  tpm: BootstrapperTpm;
  stateDisk: StateDisk;
  logger: Logger;
  clock: Clock;
  joinService: JoinServiceSettings & { host: string; port: number };
  /** This node's part of the cluster store (control-plane nodes). */
  store: ClusterStoreHost;
  /** The node lock whose token each changing step requires. */
  lock: NodeLock;
}

export class NodeSetup {
  private extendedWith: Buffer | undefined;
  private diskOpen = false;
  private sshHostKey: SshHostKey | undefined;
  private joinService: Promise<JoinServiceHandle> | undefined;

  constructor(private readonly options: NodeSetupOptions) {}

  /**
   * Extends PCR 15 with the clusterID in every allocated SHA-256/SHA-384 bank: PCR15 = H(0 ‖ H(clusterID)).
   * Once per boot; a second call with the same clusterID does nothing, another clusterID is refused.
   */
  async extendClusterPcr(token: LockToken, clusterId: Uint8Array): Promise<void> {
    this.options.lock.check(token, 'extend PCR 15');
    if (clusterId.length !== CLUSTER_ID_LENGTH)
      throw new UserError(`A clusterID has ${CLUSTER_ID_LENGTH} bytes, got ${clusterId.length}.`);
    if (this.extendedWith) {
      if (this.extendedWith.equals(clusterId)) return;
      throw new UserError(
        'PCR 15 already holds another clusterID: this node belongs to another cluster until it reboots.',
      );
    }
    const banks = (await this.options.tpm.pcrBanks()).filter(
      (b) => BANK_HASHES[b.hashAlg] && b.pcrs.includes(CLUSTER_PCR),
    );
    if (banks.length === 0) throw new UserError('The TPM has no SHA-256 or SHA-384 bank with PCR 15.');
    await this.options.tpm.pcrExtend(
      CLUSTER_PCR,
      banks.map((b) => ({
        hashAlg: b.hashAlg,
        digest: new Uint8Array(createHash(BANK_HASHES[b.hashAlg]).update(clusterId).digest()),
      })),
    );
    this.extendedWith = Buffer.from(clusterId);
    this.options.lock.commit(token);
    this.options.logger.info('extended PCR 15 with the clusterID', {
      clusterId: Buffer.from(clusterId).toString('hex'),
    });
  }

  /**
   * Formats the state disk with `key` on first use, unlocks it otherwise (a wrong key is refused by the disk).
   * Once open, later calls (a retried init, a rejoin after its key was checked) return at once. The disk open
   * commits the caller's lock; a key the disk refuses leaves both as they were.
   */
  async openStateDisk(token: LockToken, key: Uint8Array): Promise<'formatted' | 'unlocked'> {
    const { stateDisk: disk, lock } = this.options;
    lock.check(token, 'open the state disk');
    if (this.diskOpen) return 'unlocked';
    if (await disk.isFormatted()) {
      await disk.unlock(key);
      this.diskOpen = true;
      lock.commit(token);
      this.options.logger.info('state disk unlocked', { diskUuid: disk.uuid });
      return 'unlocked';
    }
    const started = this.options.clock().getTime();
    await disk.format(key);
    this.diskOpen = true;
    lock.commit(token);
    this.options.logger.info('state disk formatted', {
      diskUuid: disk.uuid,
      ms: this.options.clock().getTime() - started,
    });
    return 'formatted';
  }

  async writeClusterRecord(token: LockToken, record: ClusterRecord): Promise<void> {
    this.options.lock.check(token, 'write the cluster record');
    await this.putClusterRecord(record);
  }

  private async putClusterRecord(record: ClusterRecord): Promise<void> {
    await this.options.stateDisk.writeFile(CLUSTER_RECORD_FILE, Buffer.from(`${JSON.stringify(record)}\n`));
  }

  /** The record written at init or join; a UserError when the (unlocked) disk has none. */
  async readClusterRecord(): Promise<ClusterRecord & { measurementSaltBytes: Uint8Array }> {
    const bytes = await this.options.stateDisk.readFile(CLUSTER_RECORD_FILE);
    let record: Partial<ClusterRecord> | undefined;
    try {
      record = bytes ? (JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<ClusterRecord>) : undefined;
    } catch {
      record = undefined;
    }
    const salt =
      typeof record?.measurementSalt === 'string' ? Buffer.from(record.measurementSalt, 'hex') : Buffer.alloc(0);
    if (!record || salt.length !== MEASUREMENT_SALT_LENGTH) {
      throw new UserError(
        `The state disk ${this.options.stateDisk.uuid} holds no valid cluster record (${CLUSTER_RECORD_FILE}).`,
        {
          hint: 'The node was interrupted while it first joined; reset its state disk and let it join again.',
        },
      );
    }
    return { ...(record as ClusterRecord), measurementSaltBytes: new Uint8Array(salt) };
  }

  /**
   * Keeps the Kubernetes version the node runs after an in-place upgrade in its cluster record (a rejoin reports it).
   * Only a node in its cluster (the lock committed) follows upgrades; it needs no owner's token.
   */
  async recordKubernetesVersion(version: string): Promise<void> {
    if (!this.options.lock.committed)
      throw new NodeLockError('Cannot record a Kubernetes version: the node is not in a cluster yet.');
    const { origin, role, clusterId, measurementSalt } = await this.readClusterRecord();
    await this.putClusterRecord({ origin, role, clusterId, measurementSalt, kubernetesVersion: version });
  }

  /** Writes one of the node's files (below the state disk's mount point). */
  /**
   * The SSH host key this node enters its cluster with (made once per process, kept in memory until
   * writeSshHostIdentity puts it on the state disk): its public half goes into the join request, or the init node
   * certifies it itself. A rebooted node keeps the key and certificate its disk already holds.
   */
  sshHostPublicKey(): ParsedPublicKey {
    this.sshHostKey ??= generateSshHostKey();
    return this.sshHostKey.publicKey;
  }

  /** Writes the host key and its host certificate (from the CA) to the state disk, where the SSH server reads them. */
  async writeSshHostIdentity(token: LockToken, certificate: Uint8Array): Promise<void> {
    this.options.lock.check(token, 'write the SSH host key');
    this.sshHostPublicKey();
    await this.options.stateDisk.writeFile(NODE_SSH_HOST_KEY_FILE, Buffer.from(this.sshHostKey!.privateKeyFile));
    await this.options.stateDisk.writeFile(NODE_SSH_HOST_CERT_FILE, certificate);
  }

  async writeNodeFile(token: LockToken, name: string, data: Uint8Array): Promise<void> {
    this.options.lock.check(token, `write ${name}`);
    await this.options.stateDisk.writeFile(name, data);
  }

  /** Appends to the node's boot history on its state disk (the disk is open). */
  async recordClusterEntry(token: LockToken, how: ClusterEntry): Promise<void> {
    this.options.lock.check(token, 'write the boot history');
    const earlier = (await this.options.stateDisk.readFile(BOOT_HISTORY_FILE)) ?? new Uint8Array(0);
    const line = `${JSON.stringify({ time: this.options.clock().toISOString(), how })}\n`;
    await this.options.stateDisk.writeFile(BOOT_HISTORY_FILE, Buffer.concat([earlier, Buffer.from(line)]));
    // What the disk held before this boot, read back: after a reboot, the first entry is the one the first boot wrote.
    const lines = Buffer.from(earlier).toString('utf8').split('\n').filter(Boolean);
    this.options.logger.info('boot history recorded', { entries: lines.length + 1, first: lines[0] ?? line.trim() });
  }

  /**
   * Back into the cluster after a reboot (rejoin ticket or recovery): unlock the disk, recompute the clusterID
   * from the measurement secret and the salt on the disk, extend PCR 15, and on a control-plane node that
   * hosted a join service before, start it again. Returns the clusterID and the node's cluster record.
   */
  async resume(
    token: LockToken,
    diskKey: Uint8Array,
    measurementSecret: Uint8Array,
    options: { hostJoinService: boolean; how: ClusterEntry },
  ): Promise<{ clusterId: Uint8Array; record: ClusterRecord }> {
    this.options.lock.check(token, 'rejoin the cluster', ['join', 'recover']);
    await this.openStateDisk(token, diskKey);
    const record = await this.readClusterRecord();
    const clusterId = deriveClusterId(measurementSecret, record.measurementSaltBytes);
    if (Buffer.from(clusterId).toString('hex') !== record.clusterId) {
      throw new UserError(
        'The measurement secret does not give the clusterID this node recorded: it belongs to another cluster.',
      );
    }
    await this.extendClusterPcr(token, clusterId);
    await this.recordClusterEntry(token, options.how);
    if (options.hostJoinService && (await this.options.store.hosted())) {
      await this.options.store.resume();
      await this.startJoinService(token);
    }
    return { clusterId, record };
  }

  /** The first control plane at init: creates the cluster store with this node in it. */
  async createStore(token: LockToken, pki: ClusterPki, options: { alone?: boolean } = {}): Promise<void> {
    this.options.lock.check(token, 'create the cluster store', ['init']);
    return this.options.store.create(pki, options);
  }

  /** A control plane that joined: becomes part of the cluster store through the ticket's endpoints. */
  async joinStore(token: LockToken, pki: ClusterPki, endpoints: string[]): Promise<void> {
    this.options.lock.check(token, 'join the cluster store', ['join']);
    return this.options.store.join(pki, endpoints);
  }

  /** Credentials for the CLI to reach the cluster store (made at init). */
  async storeCredentials(token: LockToken, pki: ClusterPki): Promise<StoreCredentials> {
    this.options.lock.check(token, "make the CLI's cluster-store credentials", ['init']);
    return this.options.store.adminCredentials(pki);
  }

  /** A client of the cluster store with the join service's rights. */
  openStore(): Promise<ClusterStore> {
    return this.options.store.open();
  }

  /** A client of the cluster store with every right: init writes the join configuration through it. */
  async openStoreAsAdmin(token: LockToken, pki: ClusterPki): Promise<ClusterStore> {
    this.options.lock.check(token, 'write the join configuration', ['init']);
    return this.options.store.openAsAdmin(pki);
  }

  /** Starts the join service on this node, reading the cluster store (once; later calls return the same service). */
  async startJoinService(token: LockToken): Promise<JoinServiceHandle> {
    this.options.lock.check(token, 'start the join service');
    const settings = this.options.joinService;
    this.joinService ??= (async () => {
      const store = await this.options.store.open();
      try {
        const service = await startJoinService({
          host: settings.host,
          port: settings.port,
          store,
          validatorDeps: settings.validatorDeps,
          createValidator: settings.createValidator,
          tokenSink: settings.tokenSink,
          instanceAddresses: settings.instanceAddresses,
          beforePeerJoins: () => this.options.store.beforePeerJoins?.() ?? Promise.resolve(),
          logger: this.options.logger,
          clock: this.options.clock,
        });
        return { port: service.port, close: async () => (await service.close(), await store.close()) };
      } catch (err) {
        await store.close();
        throw err;
      }
    })();
    // A start that failed may be tried again (e.g. by a retried init).
    this.joinService.catch(() => (this.joinService = undefined));
    return await this.joinService;
  }

  /** The join service this node runs (started by its owner), if any: a read-only view for status and tests. */
  runningJoinService(): Promise<JoinServiceHandle> | undefined {
    return this.joinService;
  }

  /** Stops the join service, then this node's part of the cluster store. */
  async close(): Promise<void> {
    const service = this.joinService;
    this.joinService = undefined;
    await service?.then(
      (s) => s.close(),
      () => undefined,
    );
    await this.options.store.close();
  }
}
