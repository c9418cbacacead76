/**
 * `create` on GCP. It runs the plan (./plan.ts) as a dependency graph:
 * independent inserts run concurrently, each resource is recorded in the journal as soon as GCP accepted its
 * insert (with the operation, so a re-run resumes waiting for it) and marked created when the operation is
 * done. A re-run skips what exists, resumes what was in flight and inserts the rest; a name GCP already
 * knows (an insert accepted just before an interruption) is adopted. A failure throws CreateFailedError
 * (canRollBack), after which terminate deletes exactly what was recorded.
 */
import path from 'node:path';
import type { NetworksClient } from '@google-cloud/compute';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, CreateResult, ProviderContext, RecordedResource } from '../contract.js';
import { runTaskGraph, TaskGraphError } from '../common/task-graph.js';
import { GcpCompute, journalKind, KINDS, refId, type GcpResource, type Operation } from './clients.js';
import {
  CreateFailedError,
  gcpErrorInfo,
  GcpOperationError,
  isAlreadyExists,
  isNotFound,
  isRetryable,
  toUserError,
} from './errors.js';
import { DEFAULT_PROPAGATION, type GcpProviderOptions } from './options.js';
import { buildPlan, NODE_CIDR, POD_CIDR, type PlanStep } from './plan.js';
import { sleep } from './retry.js';

/** What the journal keeps about an operation in flight, to resume waiting for it. */
interface RecordedOperation {
  name: string;
  zone?: string;
  region?: string;
}

export class GcpCreate {
  constructor(
    private readonly options: GcpProviderOptions,
    /** The Compute clients for a credentials file (the provider keeps one set per file). */
    private readonly api: (keyFile: string | undefined) => Promise<GcpCompute>,
  ) {}

  async run(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    const plan = buildPlan(request);
    this.options.onPlan?.(plan.steps.map((s) => ({ id: s.key, deps: [...s.deps] })));
    const keyFile = plan.config.serviceAccountKeyPath
      ? path.resolve(ctx.workspaceDir, plan.config.serviceAccountKeyPath)
      : undefined;
    const api = await this.api(keyFile);
    await this.waitForAccess(api, plan.config.project, ctx);
    // Client set-up costs CPU time (large protos); do it before the clock of the first insert starts.
    await api.prepare(plan.steps.map((s) => s.ref.kind));
    const recorded = new Map((await ctx.journal.list()).map((r) => [r.id, r]));
    const idByKey = new Map(plan.steps.map((s) => [s.key, refId(s.ref)]));
    const outputs = new Map<string, GcpResource>();
    const extraData = keyFile ? { serviceAccountKeyPath: keyFile } : {};
    const tasks = plan.steps.map((step) => ({
      id: step.key,
      deps: step.deps,
      run: () =>
        this.ensure(api, step, { ctx, recorded, outputs, dependsOn: step.deps.map((d) => idByKey.get(d)!), extraData }),
    }));
    try {
      await runTaskGraph(tasks, { signal: ctx.signal });
    } catch (err) {
      throw this.createFailed(err, plan.steps, ctx.signal);
    }
    const ip = String(outputs.get('address')?.address ?? '');
    const { project, region, zone } = plan.config;
    const groups = plan.steps.filter((s) => s.ref.kind === 'instanceGroupManager');
    return {
      clusterEndpoint: ip,
      inClusterEndpoint: ip,
      apiServerCertSANs: [ip],
      ipCidrNode: NODE_CIDR,
      providerState: {
        // The subnet's pod range, as upstream's state file names it: the cluster's pod network.
        ipCidrPod: POD_CIDR,
        project,
        region,
        zone,
        network: plan.steps.find((s) => s.key === 'network')!.ref.name,
        subnetwork: plan.steps.find((s) => s.key === 'subnetwork')!.ref.name,
        loadBalancerAddress: idByKey.get('address'),
        instanceGroups: Object.fromEntries(groups.map((s) => [String(s.data.nodeGroup), refId(s.ref)])),
      },
    };
  }

  /**
   * The credentials work and reach the project. A key or role binding `iam create gcp` just made takes a while to
   * take effect (https://cloud.google.com/iam/docs/access-change-propagation): until then the token request fails
   * with invalid_grant or the calls with 403, so both are waited through (options.propagation) before create starts.
   */
  private async waitForAccess(api: GcpCompute, project: string, ctx: ProviderContext): Promise<void> {
    const policy = { ...DEFAULT_PROPAGATION, ...this.options.propagation };
    const networks = api.client<NetworksClient>('NetworksClient');
    for (let attempt = 1; ; attempt++) {
      try {
        await api.checkCredentials();
        await api.rawCall(() => networks.list({ project, maxResults: 1 }, { autoPaginate: false }), {
          signal: ctx.signal,
        });
        return;
      } catch (err) {
        const info = gcpErrorInfo(err);
        const propagating = /invalid_grant/.test(info.message) || (info.status === 403 && !isRetryable(err));
        if (!propagating || attempt >= policy.attempts)
          throw err instanceof UserError ? err : toUserError('Checking access to the project', err);
        if (attempt === 1) ctx.progress?.("waiting for the service account's key and roles to take effect");
        ctx.log.debug('gcp: access not effective yet', { attempt, reason: info.reason });
        await sleep(Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1)), ctx.signal);
      }
    }
  }

  /** Makes one planned resource exist: skip, resume or insert (see the module header). */
  private async ensure(
    api: GcpCompute,
    step: PlanStep,
    run: {
      ctx: ProviderContext;
      recorded: Map<string, RecordedResource>;
      outputs: Map<string, GcpResource>;
      dependsOn: string[];
      extraData: Record<string, unknown>;
    },
  ): Promise<void> {
    const { ctx } = run;
    const call = { signal: ctx.signal };
    const spec = KINDS[step.ref.kind];
    const what = `${spec.label} ${step.ref.name}`;
    const id = refId(step.ref);
    const record = (data: Record<string, unknown>) =>
      ctx.journal.record({
        kind: journalKind(step.ref.kind),
        id,
        name: step.ref.name,
        dependsOn: run.dependsOn,
        data: { ...step.data, ...run.extraData, ...data },
      });
    const finish = async () => {
      if (step.readBack) run.outputs.set(step.key, (await api.get(step.ref, call)) ?? {});
    };

    const previous = run.recorded.get(id);
    if (previous) {
      const op = previous.data?.operation as RecordedOperation | undefined;
      if (previous.data?.state !== 'created' && op) {
        ctx.progress?.(`waiting for ${what} (from an earlier run)`);
        try {
          await api.waitForOperation({ ...op, status: 'RUNNING' }, step.ref.project, call);
        } catch (err) {
          // The earlier insert failed or its operation expired: the get below decides.
          if (!(err instanceof GcpOperationError) && !isNotFound(err)) throw err;
        }
      }
      if (await api.get(step.ref, call)) {
        ctx.log.debug('gcp: resource exists, skipping', { id });
        if (previous.data?.state !== 'created') await record({ state: 'created' });
        return finish();
      }
    }

    ctx.progress?.(`creating ${what}`);
    let op: Operation;
    try {
      op = await api.insert(step.ref, step.body(run.outputs), call);
    } catch (err) {
      if (!isAlreadyExists(err)) throw toUserError(`Creating ${what}`, err);
      // Accepted in an earlier run that was interrupted before it could record it: adopt it.
      ctx.log.debug('gcp: resource already exists, adopting it', { id });
      await record({ state: 'created' });
      return finish();
    }
    const operation: RecordedOperation = {
      name: op.name ?? '',
      ...(op.zone ? { zone: op.zone } : {}),
      ...(op.region ? { region: op.region } : {}),
    };
    await record({ state: 'creating', operation });
    try {
      await api.waitForOperation(op, step.ref.project, call);
    } catch (err) {
      throw toUserError(`Creating ${what}`, err);
    }
    await record({ state: 'created' });
    ctx.log.debug('gcp: created', { id });
    await finish();
  }

  private createFailed(err: unknown, steps: PlanStep[], signal?: AbortSignal): UserError {
    if (signal?.aborted) {
      return new CreateFailedError('Creating the GCP infrastructure was interrupted.', { cause: err });
    }
    if (err instanceof TaskGraphError) {
      const step = steps.find((s) => s.key === err.task);
      const cause =
        err.cause instanceof UserError
          ? err.cause
          : toUserError(`Creating ${step ? KINDS[step.ref.kind].label : err.task}`, err.cause);
      return new CreateFailedError(`Creating the GCP infrastructure stopped: ${cause.message}`, {
        step: err.task,
        cause,
        hint: cause.hint,
      });
    }
    return err instanceof UserError ? err : toUserError('Creating the GCP infrastructure', err);
  }
}
