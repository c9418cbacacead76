/**
 * The node lock (docs/bootstrapper.md#the-node-lock): init, join (and rejoin) and recovery run in parallel, and
 * whichever gets a cluster's secrets first takes the lock; the others stand down. Taking it hands out a LockToken,
 * an object only the owner holds: every step that changes the node (opening the state disk, extending PCR 15,
 * writing the node's files, starting its part of the cluster store, setting a state of the owner's) requires it
 * (NodeLock.check), so no step can run for two owners, or for one that lost.
 *
 * A hold is provisional until the owner's first step that cannot be undone (extending PCR 15 or opening the state
 * disk with its key) commits it. Before that, an owner whose key the disk refused releases the lock and the node is
 * as it was (a wrong master secret from `recover`, a rejoin ticket whose key is not the disk's). Committed, the lock
 * is never released: a node belongs to at most one cluster per boot, so nothing can re-initialize or re-join it.
 * Upstream Constellation has the same point of no return in its bootstrapper's TryLockOnce.
 */
import { UserError } from '../lib/errors.js';

export type LockOwner = 'init' | 'join' | 'recover';

/** Proof of holding the lock: the one object tryLock returned. Its identity, not its fields, is the proof. */
export interface LockToken {
  readonly owner: LockOwner;
}

/** A step ran without the lock, or with a token that no longer holds it (a bug, reported as such, never silently). */
export class NodeLockError extends UserError {}

export class NodeLock {
  private holder: LockToken | undefined;
  private isCommitted = false;
  private readonly listeners: Array<(owner: LockOwner) => void> = [];

  /** Takes the lock for `owner`: its token, or undefined when the lock is held (by anyone, including `owner`). */
  tryLock(owner: LockOwner): LockToken | undefined {
    if (this.holder !== undefined) return undefined;
    this.holder = Object.freeze({ owner });
    return this.holder;
  }

  /** The holder's first step that cannot be undone happened: the hold is final. Idempotent. */
  commit(token: LockToken): void {
    this.check(token, 'commit the node lock');
    if (this.isCommitted) return;
    this.isCommitted = true;
    for (const listener of this.listeners.splice(0)) listener(token.owner);
  }

  /** Gives a provisional hold back (the owner changed nothing); refused once committed. */
  release(token: LockToken): void {
    this.check(token, 'release the node lock');
    if (this.isCommitted)
      throw new NodeLockError(`The node lock of ${token.owner} is committed and is never released.`);
    this.holder = undefined;
  }

  /** Throws a NodeLockError unless `token` holds the lock (and, with `owners`, belongs to one of them). */
  check(token: LockToken | undefined, step: string, owners?: readonly LockOwner[]): void {
    if (token === undefined || token !== this.holder) {
      const held = this.holder ? `held by ${this.holder.owner}` : 'not held';
      throw new NodeLockError(`Cannot ${step}: the caller does not hold the node lock (it is ${held}).`);
    }
    if (owners && !owners.includes(token.owner)) {
      throw new NodeLockError(`Cannot ${step}: that is not a step of ${token.owner} (only of ${owners.join(' or ')}).`);
    }
  }

  /** Who holds the lock, provisionally or committed. */
  get owner(): LockOwner | undefined {
    return this.holder?.owner;
  }

  /** Held, provisionally or committed. */
  get locked(): boolean {
    return this.holder !== undefined;
  }

  /** Held for good: the node is (being) set up by its owner. */
  get committed(): boolean {
    return this.isCommitted;
  }

  /** Calls `listener` once when the lock is committed (at once when it already is). */
  onCommitted(listener: (owner: LockOwner) => void): void {
    if (this.isCommitted) listener(this.holder!.owner);
    else this.listeners.push(listener);
  }
}
