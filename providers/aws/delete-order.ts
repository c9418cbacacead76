/**
 * Deleting recorded resources in reverse dependency order (terminate, iam destroy): a resource is deleted only
 * after everything that depends on it is gone; independent deletes run concurrently; each deleted resource is
 * forgotten in the journal at once, so an interrupted run continues where it stopped. Deletes refused because
 * the resource is still in use (AWS releases network interfaces and role attachments with a delay) are retried.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { UserError } from '../../lib/errors.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import { awsErrorCode, isDependencyViolation, toUserError } from './errors.js';
import type { AwsProviderOptions } from './options.js';
import { runTaskGraph, TaskGraphError, type Task } from './task-graph.js';

/** EC2 answers a release of an address still held by a NAT gateway or load balancer with these. */
const IN_USE_CODES = new Set(['InvalidIPAddress.InUse', 'AuthFailure.AddressInUse']);

export interface DeleteOptions {
  ctx: ProviderContext;
  options: AwsProviderOptions;
  /** Deletes one resource; must treat "already gone" as success. */
  deleteOne: (r: RecordedResource) => Promise<void>;
  /** Forget each deleted resource in the journal (false for resources found by tag, which it never held). */
  fromJournal: boolean;
  /** "Terminating the AWS infrastructure", "Destroying the IAM identities". */
  what: string;
}

export async function deleteInReverseOrder(resources: RecordedResource[], o: DeleteOptions): Promise<void> {
  const ids = new Set(resources.map((r) => r.id));
  const tasks: Task[] = resources.map((r) => ({
    id: r.id,
    deps: resources.filter((x) => x.id !== r.id && ids.has(x.id) && x.dependsOn?.includes(r.id)).map((x) => x.id),
    run: async () => {
      o.ctx.progress?.(`deleting ${r.name ?? r.id}`);
      await withInUseRetries(o, () => o.deleteOne(r));
      if (o.fromJournal) await o.ctx.journal.remove(r.id);
    },
  }));
  try {
    await runTaskGraph(tasks, { signal: o.ctx.signal });
  } catch (err) {
    if (!(err instanceof TaskGraphError)) throw err;
    const first = toUserError(`Deleting ${err.task}`, err.cause);
    throw new UserError(`${o.what} failed: ${first.message}`, {
      hint: `${first.hint ? `${first.hint} ` : ''}What is not deleted yet is still recorded in the workspace: run the command again.`,
      cause: first,
    });
  }
}

async function withInUseRetries(o: DeleteOptions, fn: () => Promise<void>): Promise<void> {
  const attempts = o.options.dependencyRetries ?? 30;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const inUse = isDependencyViolation(err) || IN_USE_CODES.has(awsErrorCode(err));
      if (!inUse || attempt >= attempts) throw err;
      o.ctx.log.debug('resource still in use, retrying the delete', { code: awsErrorCode(err), attempt });
      await sleep(o.options.pollIntervalMs ?? 10_000, undefined, { signal: o.ctx.signal });
    }
  }
}
