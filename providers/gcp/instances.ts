/**
 * The cluster's instances on GCP, as the contract's instance members (providers/contract.ts) need them:
 *
 *   list            the instances carrying the cluster's uid label, in every zone a recorded group uses
 *   scale (grow)    resize of the group, then the wait until it has that many running instances
 *   add             the group's template with the configured image, then one more instance (./scaling.ts)
 *   drain           out of its managed instance group, so out of the load balancer; still running (./scaling.ts)
 *   remove          deleteInstances of exactly that instance; its group shrinks by one (./scaling.ts)
 *   markInitialized no template and no instance carries the init-secret hash any more (./scaling.ts)
 *
 * What an instance looks like to the contract (ids, role, node group) is ./gce-instance.ts.
 */
import type { InstanceGroupManagersClient, InstancesClient } from '@google-cloud/compute';
import { UserError } from '../../lib/errors.js';
import type { Instance, ProviderContext } from '../contract.js';
import { journalKind, parseRefId, type GcpCompute, type Operation } from './clients.js';
import { isNotFound, toUserError } from './errors.js';
import { instanceId, parseInstanceId, toInstance, type GceInstance, type InstanceRef } from './gce-instance.js';
import type { GcpProviderOptions } from './options.js';
import { labelValue, LABEL_UID } from './plan.js';
import { GcpScaling, type GroupRecord } from './scaling.js';

export class GcpInstances {
  constructor(
    private readonly options: GcpProviderOptions,
    /** Runs fn with the Compute clients for the credentials file create recorded. */
    private readonly withApi: <T>(ctx: ProviderContext, fn: (api: GcpCompute) => Promise<T>) => Promise<T>,
  ) {}

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
        for (const instance of await this.instancesInZone(api, group.project, group.zone, group.uid, ctx))
          result.push(toInstance(instance, group.project));
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
        [instance] = await api.rawCall(
          () => instances.get({ project: ref.project, zone: ref.zone, instance: ref.name }),
          { signal: ctx.signal },
        );
      } catch (err) {
        if (isNotFound(err))
          throw new UserError(`The instance ${id} does not exist.`, {
            hint: "List the cluster's instances with `constellation status`.",
          });
        throw toUserError(`Reading instance ${ref.name}`, err);
      }
      return toInstance(instance, ref.project);
    });
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0)
      throw new UserError(`Cannot scale node group ${nodeGroup} to ${count} nodes.`, {
        hint: 'Give a whole number of 0 or more.',
      });
    const group = await this.groupRecord(nodeGroup, ctx);
    await this.withApi(ctx, async (api) => {
      const igms = api.client<InstanceGroupManagersClient>('InstanceGroupManagersClient');
      ctx.progress?.(`scaling node group ${nodeGroup} to ${count}`);
      const [lro] = await api.call(
        `Scaling node group ${nodeGroup}`,
        () => igms.resize({ project: group.project, zone: group.zone, instanceGroupManager: group.name, size: count }),
        { signal: ctx.signal },
      );
      await this.wait(api, lro.latestResponse as Operation, group.project, `Scaling node group ${nodeGroup}`, ctx);
      // The resize is DONE once GCP scheduled it; the group's instances run only later.
      await new GcpScaling(api, this.options, ctx).waitForGroup(
        group,
        (managed) => managed.length === count && managed.every((m) => m.ready),
        `node group ${nodeGroup} to have ${count} running instances`,
      );
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
      for (const zone of new Set(groups.map((g) => g.zone)))
        instances.push(...(await this.instancesInZone(api, groups[0]!.project, zone, groups[0]!.uid, ctx)));
      await new GcpScaling(api, this.options, ctx).markInitialized(groups, instances);
    });
  }

  /** The instance an id (or, as a fallback, a name) means, with its recorded group; undefined when it is gone. */
  private async findInstance(
    idOrName: string,
    ctx: ProviderContext,
  ): Promise<{ ref: InstanceRef; group?: GroupRecord } | undefined> {
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

  private async instancesInZone(
    api: GcpCompute,
    project: string,
    zone: string,
    uid: string,
    ctx: ProviderContext,
  ): Promise<GceInstance[]> {
    const instances = api.client<InstancesClient>('InstancesClient');
    const value = labelValue(uid);
    const [items] = await api.call(
      'Listing instances',
      () => instances.list({ project, zone, filter: `labels.${LABEL_UID} = "${value}"` }),
      { signal: ctx.signal },
    );
    return items.filter((i) => i.labels?.[LABEL_UID] === value);
  }

  private async wait(
    api: GcpCompute,
    op: Operation,
    project: string,
    action: string,
    ctx: ProviderContext,
  ): Promise<void> {
    try {
      await api.waitForOperation(op, project, { signal: ctx.signal });
    } catch (err) {
      throw toUserError(action, err);
    }
  }

  private async groupRecords(ctx: ProviderContext): Promise<GroupRecord[]> {
    const records = await ctx.journal.list();
    return records
      .filter((r) => r.kind === journalKind('instanceGroupManager'))
      .map((r) => {
        const ref = parseRefId(r.id)!;
        return {
          nodeGroup: String(r.data?.nodeGroup ?? ''),
          project: ref.project,
          zone: ref.location ?? '',
          name: ref.name,
          uid: String(r.data?.uid ?? ''),
          record: r,
        };
      });
  }

  private async groupRecord(nodeGroup: string, ctx: ProviderContext) {
    const groups = await this.groupRecords(ctx);
    const group = groups.find((g) => g.nodeGroup === nodeGroup);
    if (!group) {
      throw new UserError(`This workspace has no node group named "${nodeGroup}".`, {
        hint: groups.length
          ? `Node groups: ${groups.map((g) => g.nodeGroup).join(', ')}.`
          : 'Run `constellation create` first.',
      });
    }
    return group;
  }
}
