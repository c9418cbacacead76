/**
 * The node lock (docs/design.md#nodes): the init server and the join client run in parallel, and whichever gets a
 * cluster's secrets first takes the lock; the other then stands down. Unlocked → locked once, never back:
 * a node belongs to at most one cluster per boot, so nothing can re-initialize or re-join it.
 */

export type LockOwner = 'init' | 'join';

export class NodeLock {
  private holder: LockOwner | undefined;
  private readonly listeners: Array<(owner: LockOwner) => void> = [];

  /** Takes the lock for `owner`; false when it is already taken (by anyone, including `owner`). */
  tryLock(owner: LockOwner): boolean {
    if (this.holder !== undefined) return false;
    this.holder = owner;
    for (const listener of this.listeners.splice(0)) listener(owner);
    return true;
  }

  get owner(): LockOwner | undefined {
    return this.holder;
  }

  get locked(): boolean {
    return this.holder !== undefined;
  }

  /** Calls `listener` once when the lock is taken (at once when it already is). */
  onLocked(listener: (owner: LockOwner) => void): void {
    if (this.holder !== undefined) listener(this.holder);
    else this.listeners.push(listener);
  }
}
