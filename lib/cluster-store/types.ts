/**
 * The cluster store (docs/design.md#cluster-store): the one place a cluster keeps its state, read by the join service on every
 * control-plane node and written by init, by joining control planes (their node records) and by the CLI
 * (new measurements during an upgrade). A change written once is what every join service reads next.
 *
 *   join configuration   attestation config (current measurements, and the previous ones during a rollout),
 *                        cluster info (API endpoint, Kubernetes and image versions), measurement salt,
 *                        master secret, cluster PKI
 *   node records         one per node: role, state-disk UUID, when it joined and how it was last attested
 *   disk claims          state-disk UUID → the instance that first claimed it (a disk key goes to that one only)
 *   Kubernetes upgrade   the version the control planes upgrade to in place (written by the CLI's upgrade), which
 *                        control plane runs `kubeadm upgrade apply`, and how each control plane fared; written
 *                        with compare-and-swap, so exactly one control plane claims to be the first
 *
 * Backends: ./etcd.ts (an etcd cluster stacked on the control planes of `none` nodes), ./kubernetes.ts (ConfigMaps
 * and Secrets of the Kubernetes API on `kubeadm` nodes), ./memory.ts (tests). Every read of the join configuration
 * is linearizable: a store that lost its quorum refuses it (StoreUnavailableError) rather than answer stale data.
 */
import type { VariantConfig } from '../attestation/types.js';
import { UserError } from '../errors.js';
import type { MasterSecret } from '../kms/index.js';
import type { PkiFiles } from '../pki/cluster-pki.js';

export interface AttestationConfigRecord {
  variant: string;
  config: VariantConfig;
  /** Measurements still accepted while an upgrade rolls out (docs/design.md#upgrades). */
  previous?: VariantConfig[];
}

export interface ClusterInfo {
  /** host:port of the Kubernetes API server (the control-plane load balancer). */
  apiServerEndpoint: string;
  kubernetesVersion: string;
  /** The node image every node should run ("local" for the local provider's current build). */
  imageVersion?: string;
}

/** Everything a join service needs to hand out tickets. */
export interface JoinConfig {
  attestation: AttestationConfigRecord;
  cluster: ClusterInfo;
  measurementSalt: Uint8Array;
  masterSecret: MasterSecret;
  /**
   * The seed of the join-service identity key (lib/kms/join-service-key.ts): every join service signs its tickets
   * with it, and a joining node checks the signature against the public key in its metadata. Derived from the init
   * secret at init; the init secret itself is kept nowhere in the cluster.
   */
  joinServiceKey: Uint8Array;
  pki: PkiFiles;
}

export interface NodeRecord {
  name: string;
  role: 'control-plane' | 'worker';
  diskUuid: string;
  /** RFC 3339. */
  joinedAt: string;
  /** How the node came in last: init, join or rejoin. */
  lastEntry: 'init' | 'join' | 'rejoin';
  lastEntryAt: string;
}

/**
 * An in-place upgrade of the control planes' Kubernetes (docs/design.md#upgrades, bootstrapper/kubernetes-upgrade.ts): the CLI
 * writes `version` and `from`; the control plane that swaps its name into `first` runs `kubeadm upgrade apply`
 * and sets `applied`; every other control plane then runs `kubeadm upgrade node`; each records how it fared.
 */
export interface KubernetesUpgrade {
  /** The version the control planes go to. */
  version: string;
  /** The version the cluster ran when the upgrade was asked for. */
  from: string;
  /** RFC 3339. */
  requestedAt: string;
  /** The control plane that claimed the cluster-wide step (`kubeadm upgrade apply`). */
  first?: string;
  /** The first control plane finished it: the others may follow. */
  applied?: boolean;
  /** Per control plane (by node name): upgraded, or failed with the reason (the node's log has the whole output). */
  nodes: Record<string, { result: 'upgraded' | 'failed'; reason?: string; at: string }>;
}

export interface ClusterStore {
  readonly backend: 'etcd' | 'kubernetes' | 'memory';
  /**
   * The join configuration as of now (a linearizable read). `revision` changes whenever any part of it changes,
   * so a reader can keep what it built from the last one. StoreUnavailableError without a quorum.
   */
  readJoinConfig(): Promise<{ config: JoinConfig; revision: string }>;
  /** Writes the given parts of the join configuration (init writes all of them; an upgrade the attestation config). */
  writeJoinConfig(parts: Partial<JoinConfig>): Promise<void>;
  /**
   * Binds a state disk to the instance that claims it first and returns the instance it is bound to: `instance`
   * itself, or the one that claimed it before (whose disk key must then not go to `instance`).
   */
  claimDisk(diskUuid: string, instance: string): Promise<string>;
  putNode(record: NodeRecord): Promise<void>;
  getNode(name: string): Promise<NodeRecord | undefined>;
  /**
   * Where a control-plane node that joins becomes part of the store: the etcd client URLs of the voting members;
   * empty for a store the node's Kubernetes backend joins by itself (kubeadm).
   */
  memberEndpoints(): Promise<string[]>;
  listNodes(): Promise<NodeRecord[]>;
  deleteNode(name: string): Promise<void>;
  /** The Kubernetes upgrade record and its revision (changes with every write), or undefined when there is none. */
  readKubernetesUpgrade(): Promise<{ upgrade: KubernetesUpgrade; revision: string } | undefined>;
  /**
   * Compare-and-swap: writes `upgrade` only if the record is still at `revision` (undefined: only if there is no
   * record yet). Returns whether it was written; false means another writer came first (read again).
   */
  swapKubernetesUpgrade(upgrade: KubernetesUpgrade, revision: string | undefined): Promise<boolean>;
  close(): Promise<void>;
}

/** How the CLI reaches the store (constellation-store.json, written at init, mode 0600). */
export type StoreCredentials =
  | { backend: 'etcd'; endpoints: string[]; caCert: string; clientCert: string; clientKey: string }
  | { backend: 'kubernetes' };

/** How a StoreUnavailableError's message begins; a joining node recognises a join service's refusal by it. */
export const NO_QUORUM_MESSAGE = 'The control plane has no quorum';

/** The store cannot answer now (no quorum, unreachable): nothing may be decided from stale state. */
export class StoreUnavailableError extends UserError {
  constructor(detail: string, options: { cause?: unknown } = {}) {
    super(`${NO_QUORUM_MESSAGE}: the cluster store cannot answer (${detail}).`, {
      hint: 'Bring control-plane nodes back (`constellation status` shows which are down; `constellation mini start` or `constellation recover`), then try again.',
      cause: options.cause,
    });
  }
}

/** The store holds no (complete) join configuration: the cluster was not initialized through it. */
export class StoreNotInitializedError extends UserError {}
