/**
 * What the bootstrapper is doing, as the verify service's GetStatus reports it (`constellation status`):
 * waiting → initializing → initialized, or waiting → joining → joined; refused when the join service turned
 * the node down (with its reason, which names the PCR); failed when setting up after the lock went wrong;
 * awaiting-recovery when a control-plane node back from a reboot finds no join service (`constellation recover`).
 * Beside the state: what the node runs (variant, image, versions) and the last verifier's decision about it.
 * No secret is ever part of a status.
 */
import type { NodeRole } from '../providers/contract.js';

export const NODE_STATES = ['waiting', 'initializing', 'joining', 'initialized', 'joined', 'refused', 'failed', 'awaiting-recovery'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/** What the node runs; fixed for a boot except the Kubernetes version, known once the node is in a cluster. */
export interface NodeSoftware {
  attestationVariant: string;
  imageVersion: string;
  /** First 12 hex digits of SHA-256 over the image PCRs as booted (see imageMeasurementsDigest). */
  imageMeasurementsDigest: string;
  kubernetesVersion: string;
  microserviceVersion: string;
}

export interface AttestationOutcome {
  result: 'accepted' | 'refused';
  /** RFC 3339. */
  time: string;
  verifier: string;
  reason: string;
}

export interface NodeStatusSnapshot extends NodeSoftware {
  name: string;
  role: NodeRole;
  state: NodeState;
  /** Why the node is refused or failed; empty otherwise. */
  reason: string;
  /** Hex clusterID once the node belongs to a cluster; empty before. */
  clusterId: string;
  lastAttestation?: AttestationOutcome;
}

const NO_SOFTWARE: NodeSoftware = { attestationVariant: '', imageVersion: '', imageMeasurementsDigest: '', kubernetesVersion: '', microserviceVersion: '' };

export class NodeStatusTracker {
  private current: NodeStatusSnapshot;
  private readonly waiters: Array<{ states: readonly NodeState[]; resolve: (s: NodeStatusSnapshot) => void }> = [];

  constructor(name: string, role: NodeRole, software: Partial<NodeSoftware> = {}) {
    this.current = { name, role, state: 'waiting', reason: '', clusterId: '', ...NO_SOFTWARE, ...software };
  }

  get(): NodeStatusSnapshot {
    return { ...this.current };
  }

  set(state: NodeState, details: { reason?: string; clusterId?: Uint8Array } = {}): void {
    this.current = {
      ...this.current,
      state,
      reason: details.reason ?? '',
      clusterId: details.clusterId ? Buffer.from(details.clusterId).toString('hex') : this.current.clusterId,
    };
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].states.includes(state)) this.waiters.splice(i, 1)[0].resolve(this.get());
    }
  }

  /** Records the Kubernetes version the node was initialized or joined with. */
  setKubernetesVersion(version: string): void {
    this.current = { ...this.current, kubernetesVersion: version };
  }

  /** Records a verifier's decision about this node's attestation. */
  attested(result: AttestationOutcome['result'], verifier: string, options: { reason?: string; now?: Date } = {}): void {
    this.current = { ...this.current, lastAttestation: { result, verifier, reason: options.reason ?? '', time: (options.now ?? new Date()).toISOString() } };
  }

  /** Resolves when the node is (or becomes) in one of `states`. */
  waitFor(...states: NodeState[]): Promise<NodeStatusSnapshot> {
    if (states.includes(this.current.state)) return Promise.resolve(this.get());
    return new Promise((resolve) => this.waiters.push({ states, resolve }));
  }
}
