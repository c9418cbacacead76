/**
 * The GCP InfrastructureProvider (CLI side). `create` runs the plan (./plan.ts) as a dependency graph:
 * independent inserts run concurrently, each resource is recorded in the journal as soon as GCP accepted its
 * insert (with the operation, so a re-run resumes waiting for it) and marked created when the operation is
 * done. A re-run skips what exists, resumes what was in flight and inserts the rest; a name GCP already
 * knows (an insert accepted just before an interruption) is adopted. A failure throws CreateFailedError
 * (canRollBack), after which terminate deletes exactly what was recorded.
 */
import path from 'node:path';
import type { InstanceGroupManagersClient, InstancesClient, NetworksClient } from '@google-cloud/compute';
import { UserError } from '../../lib/errors.js';
import type {
  CreateRequest,
  CreateResult,
  Instance,
  InfrastructureProvider,
  ProviderContext,
  RecordedResource,
  TerminateOptions,
} from '../contract.js';
import { runTaskGraph, TaskGraphError } from '../common/task-graph.js';
import { GcpCompute, journalKind, KINDS, parseRefId, refId, type GcpResource, type Operation } from './clients.js';
import { CreateFailedError, gcpErrorInfo, GcpOperationError, isAlreadyExists, isNotFound, isRetryable, toUserError } from './errors.js';
import { instanceId, parseInstanceId, toInstance, type GceInstance, type InstanceRef } from './instances.js';
import { DEFAULT_PROPAGATION, type GcpProviderOptions } from './options.js';
import { buildPlan, labelValue, LABEL_UID, NODE_CIDR, POD_CIDR, type PlanStep } from './plan.js';
import { sleep } from './retry.js';
import { GcpScaling, type GroupRecord } from './scaling.js';
import { terminateRecorded } from './terminate.js';

/** What the journal keeps about an operation in flight, to resume waiting for it. */
interface RecordedOperation {
  name: string;
  zone?: string;
  region?: string;
}

export class GcpInfrastructure implements InfrastructureProvider {
  readonly name = 'gcp';
  private readonly apis = new Map<string, Promise<GcpCompute>>();

  constructor(private readonly options: GcpProviderOptions = {}) {}

  async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    const plan = buildPlan(request);
    this.options.onPlan?.(plan.steps.map((s) => ({ id: s.key, deps: [...s.deps] })));
    const keyFile = plan.config.serviceAccountKeyPath ? path.resolve(ctx.workspaceDir, plan.config.serviceAccountKeyPath) : undefined;
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
      run: () => this.ensure(api, step, { ctx, recorded, outputs, dependsOn: step.deps.map((d) => idByKey.get(d)!), extraData }),
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
        await api.rawCall(() => networks.list({ project, maxResults: 1 }, { autoPaginate: false }), { signal: ctx.signal });
        return;
      } catch (err) {
        const info = gcpErrorInfo(err);
        const propagating = /invalid_grant/.test(info.message) || (info.status === 403 && !isRetryable(err));
        if (!propagating || attempt >= policy.attempts) throw err instanceof UserError ? err : toUserError('Checking access to the project', err);
        if (attempt === 1) ctx.progress?.('waiting for the service account\'s key and roles to take effect');
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
      ctx.journal.record({ kind: journalKind(step.ref.kind), id, name: step.ref.name, dependsOn: run.dependsOn, data: { ...step.data, ...run.extraData, ...data } });
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
    const operation: RecordedOperation = { name: op.name ?? '', ...(op.zone ? { zone: op.zone } : {}), ...(op.region ? { region: op.region } : {}) };
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
      const cause = err.cause instanceof UserError ? err.cause : toUserError(`Creating ${step ? KINDS[step.ref.kind].label : err.task}`, err.cause);
      return new CreateFailedError(`Creating the GCP infrastructure stopped: ${cause.message}`, { step: err.task, cause, hint: cause.hint });
    }
    return err instanceof UserError ? err : toUserError('Creating the GCP infrastructure', err);
  }

  async listInstances(ctx: ProviderContext): Promise<Instance[]> {
    const groups = await this.groupRecords(ctx);
    if (groups.length === 0) return [];
    return this.withApi(ctx, async (api) => {
      const seen = new Set<string>();
      const result: Instance[] = [];
      for (const group of groups) {
        const key = `${group.project}/${group.zone}`;
        if (seen.has(key)) continue;
        seen.add(key);
        for (const instance of await this.instancesInZone(api, group.project, group.zone, group.uid, ctx)) result.push(toInstance(instance, group.project));
      }
      return result.sort((a, b) => a.name.localeCompare(b.name));
    });
  }

  private async describeInstance(id: string, ctx: ProviderContext): Promise<Instance> {
    const ref = parseInstanceId(id);
    return this.withApi(ctx, async (api) => {
      const instances = api.client<InstancesClient>('InstancesClient');
      let instance: GceInstance;
      try {
        [instance] = await api.rawCall(() => instances.get({ project: ref.project, zone: ref.zone, instance: ref.name }), { signal: ctx.signal });
      } catch (err) {
        if (isNotFound(err)) throw new UserError(`The instance ${id} does not exist.`, { hint: 'List the cluster\'s instances with `constellation status`.' });
        throw toUserError(`Reading instance ${ref.name}`, err);
      }
      return toInstance(instance, ref.project);
    });
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0) throw new UserError(`Cannot scale node group ${nodeGroup} to ${count} nodes.`, { hint: 'Give a whole number of 0 or more.' });
    const group = await this.groupRecord(nodeGroup, ctx);
    await this.withApi(ctx, async (api) => {
      const igms = api.client<InstanceGroupManagersClient>('InstanceGroupManagersClient');
      ctx.progress?.(`scaling node group ${nodeGroup} to ${count}`);
      const [lro] = await api.call(`Scaling node group ${nodeGroup}`, () =>
        igms.resize({ project: group.project, zone: group.zone, instanceGroupManager: group.name, size: count }), { signal: ctx.signal });
      await this.wait(api, lro.latestResponse as Operation, group.project, `Scaling node group ${nodeGroup}`, ctx);
      // The resize is DONE once GCP scheduled it; the group's instances run only later.
      await new GcpScaling(api, this.options, ctx).waitForGroup(group, (managed) => managed.length === count && managed.every((m) => m.ready), `node group ${nodeGroup} to have ${count} running instances`);
    });
  }

  /** One more instance in the group, booting the configured image (./scaling.ts). */
  async addInstance(nodeGroup: string, ctx: ProviderContext): Promise<Instance> {
    const group = await this.groupRecord(nodeGroup, ctx);
    return this.withApi(ctx, async (api) => {
      const scaling = new GcpScaling(api, this.options, ctx);
      if (this.options.image) await scaling.ensureTemplate(group, { image: this.options.image });
      const ref = await scaling.addInstance(group);
      return this.describeInstance(instanceId(ref), ctx);
    });
  }

  /** Out of the load balancer: out of its managed instance group, still running (./scaling.ts). */
  async drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    const found = await this.findInstance(id, ctx);
    if (!found?.group) return;
    const { ref, group } = found;
    await this.withApi(ctx, (api) => new GcpScaling(api, this.options, ctx).drainInstance(group, ref));
  }

  /** Deletes exactly this instance; its group shrinks by one (./scaling.ts). Gone already: nothing to do. */
  async removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    const found = await this.findInstance(id, ctx);
    if (!found) return;
    await this.withApi(ctx, (api) => new GcpScaling(api, this.options, ctx).removeInstance(found.group, found.ref));
  }

  /** No template and no instance carries the init-secret hash any more (./scaling.ts). */
  async markInitialized(ctx: ProviderContext): Promise<void> {
    const groups = await this.groupRecords(ctx);
    if (groups.length === 0) return;
    await this.withApi(ctx, async (api) => {
      const instances: GceInstance[] = [];
      for (const zone of new Set(groups.map((g) => g.zone))) instances.push(...(await this.instancesInZone(api, groups[0]!.project, zone, groups[0]!.uid, ctx)));
      await new GcpScaling(api, this.options, ctx).markInitialized(groups, instances);
    });
  }

  /** The instance an id (or, as a fallback, a name) means, with its recorded group; undefined when it is gone. */
  private async findInstance(idOrName: string, ctx: ProviderContext): Promise<{ ref: InstanceRef; group?: GroupRecord } | undefined> {
    let ref: InstanceRef;
    if (idOrName.includes('/instances/')) ref = parseInstanceId(idOrName);
    else {
      const listed = (await this.listInstances(ctx)).find((i) => i.name === idOrName);
      if (!listed) return undefined;
      ref = parseInstanceId(listed.id);
    }
    const instance = await this.withApi(ctx, (api) => new GcpScaling(api, this.options, ctx).instance(ref));
    if (!instance) return undefined;
    const nodeGroup = toInstance(instance, ref.project).nodeGroup;
    const group = (await this.groupRecords(ctx)).find((g) => g.nodeGroup === nodeGroup);
    return { ref, group };
  }

  async terminate(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    await this.withApi(ctx, async (api) => {
      await api.checkCredentials();
      await terminateRecorded(api, await ctx.journal.list(), ctx, { byTag: options.byTag === true, providerOptions: this.options });
    });
  }

  private async instancesInZone(api: GcpCompute, project: string, zone: string, uid: string, ctx: ProviderContext): Promise<GceInstance[]> {
    const instances = api.client<InstancesClient>('InstancesClient');
    const value = labelValue(uid);
    const [items] = await api.call('Listing instances', () => instances.list({ project, zone, filter: `labels.${LABEL_UID} = "${value}"` }), { signal: ctx.signal });
    return items.filter((i) => i.labels?.[LABEL_UID] === value);
  }

  private async wait(api: GcpCompute, op: Operation, project: string, action: string, ctx: ProviderContext): Promise<void> {
    try {
      await api.waitForOperation(op, project, { signal: ctx.signal });
    } catch (err) {
      throw toUserError(action, err);
    }
  }

  /** The Compute clients for a credentials file (or the options' credentials), made once per provider instance. */
  private api(keyFile: string | undefined): Promise<GcpCompute> {
    const key = keyFile ?? '';
    let api = this.apis.get(key);
    if (!api) {
      api = GcpCompute.open(this.options, keyFile);
      this.apis.set(key, api);
    }
    return api;
  }

  /** Runs fn with the clients for the credentials file create recorded (the CLI may also pass options.keyFilename). */
  private async withApi<T>(ctx: ProviderContext, fn: (api: GcpCompute) => Promise<T>): Promise<T> {
    const records = await ctx.journal.list();
    const keyFile = records.map((r) => r.data?.serviceAccountKeyPath).find((p): p is string => typeof p === 'string');
    return fn(await this.api(keyFile));
  }

  private async groupRecords(ctx: ProviderContext): Promise<GroupRecord[]> {
    const records = await ctx.journal.list();
    return records
      .filter((r) => r.kind === journalKind('instanceGroupManager'))
      .map((r) => {
        const ref = parseRefId(r.id)!;
        return { nodeGroup: String(r.data?.nodeGroup ?? ''), project: ref.project, zone: ref.location ?? '', name: ref.name, uid: String(r.data?.uid ?? ''), record: r };
      });
  }

  private async groupRecord(nodeGroup: string, ctx: ProviderContext) {
    const groups = await this.groupRecords(ctx);
    const group = groups.find((g) => g.nodeGroup === nodeGroup);
    if (!group) {
      throw new UserError(`This workspace has no node group named "${nodeGroup}".`, {
        hint: groups.length ? `Node groups: ${groups.map((g) => g.nodeGroup).join(', ')}.` : 'Run `constellation create` first.',
      });
    }
    return group;
  }
}
