/**
 * Deleting recorded resources in reverse dependency order (terminate, iam destroy), for every cloud provider:
 * a resource is deleted only after everything that depends on it is gone (its recorded dependents, plus any order
 * the provider adds, e.g. by resource kind); independent deletes run concurrently (./task-graph.ts); each deleted
 * resource is forgotten in the journal at once, so an interrupted run continues where it stopped. Deletes the
 * cloud refuses because the resource is still in use (released with a delay) can be retried. After a failed delete
 * the deleter either stops starting deletes (default) or goes on with everything that does not wait for the failed
 * resource (`onFailure: 'skip-dependents'`).
 * The provider supplies the delete call and its error translation; nothing cloud-specific is here.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProviderLogger, RecordedResource, ResourceJournal } from '../contract.js';
import { runTaskGraph, type RunOptions, type Task } from './task-graph.js';

export interface InUseRetry {
  /** For an error meaning "still in use, try again later": why (e.g. the cloud's error code); else undefined. */
  inUse: (err: unknown) => string | undefined;
  /** Attempts in all, the first included. */
  attempts: number;
  delayMs: number;
}

export interface ReverseDeleteOptions {
  /** Deletes one resource; must treat "already gone" as success. */
  deleteOne: (resource: RecordedResource) => Promise<void>;
  journal: ResourceJournal;
  /** Whether a deleted resource is removed from the journal (default: every one); false for ones it never held. */
  forget?: (resource: RecordedResource) => boolean;
  /** Order beyond the records' dependsOn: true when `first` must be gone before `then` is deleted. */
  deleteBefore?: (first: RecordedResource, then: RecordedResource) => boolean;
  inUseRetry?: InUseRetry;
  /** What a failed delete stops (see runTaskGraph): every delete not started yet (default), or only those after it. */
  onFailure?: RunOptions['onFailure'];
  /** How progress lines name a resource (default: its name, else its id). */
  describe?: (resource: RecordedResource) => string;
  progress?: (message: string) => void;
  log?: ProviderLogger;
  signal?: AbortSignal;
}

/**
 * Deletes `resources` dependents first. Rejects with a TaskGraphError (task = the id of the first resource whose
 * delete failed, `failures` all of them) after the deletes still running have finished; what is not deleted stays
 * in the journal.
 */
export async function deleteInReverseDependencyOrder(
  resources: readonly RecordedResource[],
  o: ReverseDeleteOptions,
): Promise<void> {
  const tasks: Task[] = resources.map((r) => ({
    id: r.id,
    deps: resources.filter((x) => x !== r && (x.dependsOn?.includes(r.id) || o.deleteBefore?.(x, r))).map((x) => x.id),
    run: async () => {
      o.progress?.(`deleting ${o.describe?.(r) ?? r.name ?? r.id}`);
      await withInUseRetries(r, o, () => o.deleteOne(r));
      if (o.forget?.(r) ?? true) await o.journal.remove(r.id);
    },
  }));
  await runTaskGraph(tasks, { signal: o.signal, onFailure: o.onFailure });
}

async function withInUseRetries(r: RecordedResource, o: ReverseDeleteOptions, fn: () => Promise<void>): Promise<void> {
  const retry = o.inUseRetry;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const reason = retry?.inUse(err);
      if (!retry || reason === undefined || attempt >= retry.attempts) throw err;
      o.log?.debug('resource still in use, retrying the delete', { resource: r.id, code: reason, attempt });
      await sleep(retry.delayMs, undefined, { signal: o.signal });
    }
  }
}
