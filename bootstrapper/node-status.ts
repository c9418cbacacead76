/**
 * What the bootstrapper is doing, as the verify service's GetStatus reports it (`constellation status`), and the one
 * table of the node's state machine (docs/bootstrapper.md#states): which state may follow which, and who may make
 * the move. While the node lock is free, the join client's search moves between waiting, refused and
 * awaiting-recovery (and to failed when it stops); the lock's owner alone, with its token, moves the node on:
 * init to initializing → initialized, join or recover to joining → joined, either to failed when a step fails.
 * The tracker refuses any other move with an IllegalTransitionError (logged): a late search result cannot
 * overwrite what an owner set, and no owner can claim another's outcome.
 * Beside the state: what the node runs (variant, image, versions) and the last verifier's decision about it.
 * No secret is ever part of a status.
 */
import { UserError } from '../lib/errors.js';
import type { Logger } from '../lib/logging/index.js';
import type { NodeRole } from '../providers/contract.js';
import type { LockOwner, LockToken, NodeLock } from './node-lock.js';

export const NODE_STATES = [
  'waiting',
  'initializing',
  'joining',
  'initialized',
  'joined',
  'refused',
  'failed',
  'awaiting-recovery',
] as const;
export type NodeState = (typeof NODE_STATES)[number];

/** Who makes a move: the join client's search while the lock is free ('search'), or the lock's owner with its token. */
export type Mover = 'search' | LockOwner;

export interface Transition {
  from: readonly NodeState[];
  to: NodeState;
  by: readonly Mover[];
}

/** The states of the search for a join service, before any owner holds the lock. */
const SEARCHING: readonly NodeState[] = ['waiting', 'refused', 'awaiting-recovery'];

/**
 * Every move the node may make. A state not named as a `from` of a row has no way out of it: initialized and joined
 * are final for the boot; failed is left only by a retried init (same secrets) or, when the join client stopped
 * before any owner took the lock, by init or recover.
 */
export const NODE_TRANSITIONS: readonly Transition[] = [
  { from: SEARCHING, to: 'waiting', by: ['search'] },
  { from: SEARCHING, to: 'refused', by: ['search'] },
  { from: SEARCHING, to: 'awaiting-recovery', by: ['search'] },
  { from: SEARCHING, to: 'failed', by: ['search'] },
  { from: [...SEARCHING, 'failed'], to: 'initializing', by: ['init'] },
  { from: ['initializing'], to: 'initialized', by: ['init'] },
  { from: ['initializing'], to: 'failed', by: ['init'] },
  { from: SEARCHING, to: 'joining', by: ['join', 'recover'] },
  { from: ['failed'], to: 'joining', by: ['recover'] },
  { from: ['joining'], to: 'joined', by: ['join', 'recover'] },
  { from: ['joining'], to: 'failed', by: ['join', 'recover'] },
];

/** Whether `by` may move the node from `from` to `to`. */
export function transitionAllowed(from: NodeState, to: NodeState, by: Mover): boolean {
  return NODE_TRANSITIONS.some((t) => t.to === to && t.from.includes(from) && t.by.includes(by));
}

/** A move the state machine does not have (a bug, or a search result that arrived after an owner took the node). */
export class IllegalTransitionError extends UserError {}

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

const NO_SOFTWARE: NodeSoftware = {
  attestationVariant: '',
  imageVersion: '',
  imageMeasurementsDigest: '',
  kubernetesVersion: '',
  microserviceVersion: '',
};

export interface NodeStatusOptions {
  /** The node's lock: an owner's move needs its token, a search result a free lock. */
  lock: NodeLock;
  /** Where a refused move is logged. */
  logger?: Logger;
  software?: Partial<NodeSoftware>;
}

export class NodeStatusTracker {
  private current: NodeStatusSnapshot;
  private readonly waiters: Array<{ states: readonly NodeState[]; resolve: (s: NodeStatusSnapshot) => void }> = [];
  private readonly lock: NodeLock;
  private readonly logger: Logger | undefined;

  constructor(name: string, role: NodeRole, options: NodeStatusOptions) {
    this.current = { name, role, state: 'waiting', reason: '', clusterId: '', ...NO_SOFTWARE, ...options.software };
    this.lock = options.lock;
    this.logger = options.logger;
  }

  get(): NodeStatusSnapshot {
    return { ...this.current };
  }

  /**
   * Moves the node to `state`: with `token` as the lock's owner, without one as the search (the lock must be free).
   * A move not in NODE_TRANSITIONS, or a token that does not hold the lock, throws (and is logged); nothing changes.
   */
  set(state: NodeState, details: { reason?: string; clusterId?: Uint8Array } = {}, token?: LockToken): void {
    const from = this.current.state;
    const by: Mover = token?.owner ?? 'search';
    try {
      if (token) this.lock.check(token, `set the node's state to ${state}`);
      else if (this.lock.locked)
        throw new IllegalTransitionError(
          `The search for a join service cannot set the node's state to ${state}: ${this.lock.owner} holds the node lock.`,
        );
      if (!transitionAllowed(from, state, by)) {
        throw new IllegalTransitionError(
          `The node cannot go from ${from} to ${state} (${by === 'search' ? 'by the search for a join service' : `as ${by}`}): the state machine has no such move.`,
        );
      }
    } catch (err) {
      this.logger?.error('node state change refused', { from, to: state, by, reason: (err as Error).message });
      throw err;
    }
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
  attested(
    result: AttestationOutcome['result'],
    verifier: string,
    options: { reason?: string; now?: Date } = {},
  ): void {
    this.current = {
      ...this.current,
      lastAttestation: {
        result,
        verifier,
        reason: options.reason ?? '',
        time: (options.now ?? new Date()).toISOString(),
      },
    };
  }

  /** Resolves when the node is (or becomes) in one of `states`. */
  waitFor(...states: NodeState[]): Promise<NodeStatusSnapshot> {
    if (states.includes(this.current.state)) return Promise.resolve(this.get());
    return new Promise((resolve) => this.waiters.push({ states, resolve }));
  }

  /**
   * The status once the node's state is another than `known`, or as it is after `timeoutMs` (GetStatus's long poll:
   * a caller that waits for a change sees it when it happens, without asking again and again).
   */
  changedFrom(known: NodeState, timeoutMs: number): Promise<NodeStatusSnapshot> {
    if (this.current.state !== known || timeoutMs <= 0) return Promise.resolve(this.get());
    return new Promise((resolve) => {
      const waiter = {
        states: NODE_STATES.filter((s) => s !== known),
        resolve: (snapshot: NodeStatusSnapshot) => {
          clearTimeout(timer);
          resolve(snapshot);
        },
      };
      const timer = setTimeout(() => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(this.get());
      }, timeoutMs);
      timer.unref();
      this.waiters.push(waiter);
    });
  }
}
