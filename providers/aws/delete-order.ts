/**
 * Deleting recorded AWS resources in reverse dependency order (terminate, iam destroy): the shared deleter
 * (../common/delete-order.ts) with what is AWS's own: deletes refused because the resource is still in use (AWS
 * releases network interfaces, addresses and role attachments with a delay) are retried, and a failure becomes one
 * UserError saying what failed and that a re-run continues.
 */
import { UserError } from '../../lib/errors.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import { deleteInReverseDependencyOrder } from '../common/delete-order.js';
import { TaskGraphError } from '../common/task-graph.js';
import { awsErrorCode, isDependencyViolation, toUserError } from './errors.js';
import type { AwsProviderOptions } from './options.js';

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
  try {
    await deleteInReverseDependencyOrder(resources, {
      deleteOne: o.deleteOne,
      journal: o.ctx.journal,
      forget: () => o.fromJournal,
      inUseRetry: {
        inUse: (err) =>
          isDependencyViolation(err) || IN_USE_CODES.has(awsErrorCode(err)) ? awsErrorCode(err) : undefined,
        attempts: o.options.dependencyRetries ?? 30,
        delayMs: o.options.pollIntervalMs ?? 10_000,
      },
      progress: o.ctx.progress,
      log: o.ctx.log,
      signal: o.ctx.signal,
    });
  } catch (err) {
    if (!(err instanceof TaskGraphError)) throw err;
    const first = toUserError(`Deleting ${err.task}`, err.cause);
    throw new UserError(`${o.what} failed: ${first.message}`, {
      hint: `${first.hint ? `${first.hint} ` : ''}What is not deleted yet is still recorded in the workspace: run the command again.`,
      cause: first,
    });
  }
}
