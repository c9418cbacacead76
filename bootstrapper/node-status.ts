/**
 * What the bootstrapper is doing, as the verify service's GetStatus reports it (`constellation status`):
 * waiting → initializing → initialized, or waiting → joining → joined; refused when the join service turned
 * the node down (with its reason, which names the PCR); failed when setting up after the lock went wrong.
 * No secret is ever part of a status.
 */
import type { NodeRole } from '../providers/contract.js';

export const NODE_STATES = ['waiting', 'initializing', 'joining', 'initialized', 'joined', 'refused', 'failed'] as const;
export type NodeState = (typeof NODE_STATES)[number];

export interface NodeStatusSnapshot {
  name: string;
  role: NodeRole;
  state: NodeState;
  /** Why the node is refused or failed; empty otherwise. */
  reason: string;
  /** Hex clusterID once the node belongs to a cluster; empty before. */
  clusterId: string;
}

export class NodeStatusTracker {
  private current: NodeStatusSnapshot;
  private readonly waiters: Array<{ states: readonly NodeState[]; resolve: (s: NodeStatusSnapshot) => void }> = [];

  constructor(name: string, role: NodeRole) {
    this.current = { name, role, state: 'waiting', reason: '', clusterId: '' };
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

  /** Resolves when the node is (or becomes) in one of `states`. */
  waitFor(...states: NodeState[]): Promise<NodeStatusSnapshot> {
    if (states.includes(this.current.state)) return Promise.resolve(this.get());
    return new Promise((resolve) => this.waiters.push({ states, resolve }));
  }
}
