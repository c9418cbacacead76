/**
 * The cluster's instances on Azure, as the contract's instance members (providers/contract.ts) need them:
 *
 *   list            the recorded scale sets' VMs (./scale-set-members.ts)
 *   scale (grow)    the scale set's capacity
 *   add             the model's image set to the configured one, then capacity + 1; done when the new VM is Ready
 *   drain           the VM's NIC out of the load balancer's backend pool; the VM keeps running
 *   remove          delete exactly that VM; the capacity goes down by one with it
 *   markInitialized the scale sets stop carrying the init-secret hash tag
 */
import type { VirtualMachineScaleSet, VirtualMachineScaleSetVM } from '@azure/arm-compute';
import { UserError } from '../../lib/errors.js';
import type { Instance, ProviderContext, RecordedResource } from '../contract.js';
import { lroOptions, type AzureClients } from './clients.js';
import type { RecordData } from './create.js';
import { isNotFound, toUserError } from './errors.js';
import type { AzureProviderOptions } from './options.js';
import { imageReference, parseResourceId, TAG_INIT_SECRET_HASH } from './plan.js';
import { imageOf, listScaleSetMembers, type ScaleSetMember } from './scale-set-members.js';

export class AzureInstances {
  constructor(
    private readonly options: AzureProviderOptions,
    /** The SDK clients for a subscription (the provider keeps one set per subscription). */
    private readonly clients: (subscription: string) => Promise<AzureClients>,
  ) {}

  private async scaleSets(ctx: ProviderContext): Promise<RecordedResource[]> {
    return (await ctx.journal.list()).filter((r) => r.kind === 'azure:vmss');
  }

  private async membersOf(scaleSet: RecordedResource): Promise<ScaleSetMember[]> {
    const { subscription, resourceGroup, name } = parseResourceId(scaleSet.id);
    try {
      return await listScaleSetMembers(await this.clients(subscription), resourceGroup, name);
    } catch (err) {
      throw toUserError(err, `listing the VMs of scale set ${name}`);
    }
  }

  async listInstances(ctx: ProviderContext): Promise<Instance[]> {
    const sets = await this.scaleSets(ctx);
    const lists = await Promise.all(
      sets.map(async (set) => (await this.membersOf(set)).map((m) => toInstance(m, set))),
    );
    return lists.flat();
  }

  /** The recorded scale set an instance id (.../virtualMachineScaleSets/{set}/virtualMachines/{n}) belongs to. */
  private async scaleSetOf(id: string, ctx: ProviderContext): Promise<{ set: RecordedResource; instanceId: string }> {
    const match = /^(.*\/virtualMachineScaleSets\/[^/]+)\/virtualMachines\/([^/]+)$/i.exec(id);
    const set = match && (await this.scaleSets(ctx)).find((s) => s.id.toLowerCase() === match[1].toLowerCase());
    if (!match || !set) {
      throw new UserError(`"${id}" is not a VM of this cluster's scale sets.`, {
        hint: "`constellation status` lists the cluster's instances and their ids.",
      });
    }
    return { set, instanceId: match[2] };
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0)
      throw new UserError(`Cannot scale node group ${nodeGroup} to ${count}: use a whole number >= 0.`);
    const sets = await this.scaleSets(ctx);
    const set = sets.find((s) => (s.data as RecordData | undefined)?.nodeGroup === nodeGroup);
    if (!set) {
      const known = sets.map((s) => (s.data as RecordData | undefined)?.nodeGroup).join(', ');
      throw new UserError(`Node group "${nodeGroup}" is not part of this cluster.`, {
        hint: `Node groups: ${known || 'none'}.`,
      });
    }
    await this.setCapacity(set, count, ctx);
  }

  private async setCapacity(set: RecordedResource, capacity: number, ctx: ProviderContext): Promise<void> {
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    ctx.progress?.(`scaling ${name} to ${capacity}`);
    try {
      const { compute } = await this.clients(subscription);
      await compute.virtualMachineScaleSets.update(
        resourceGroup,
        name,
        { sku: { capacity } },
        lroOptions(this.options, ctx.signal),
      );
    } catch (err) {
      throw toUserError(err, `scaling scale set ${name}`);
    }
  }

  /**
   * One more VM in the scale set, made from the model with the configured image: the model's image is set first
   * (upgrade policy Manual: running VMs keep theirs), then the capacity goes up by one; Azure's operation finishes
   * when the new VM reported Ready (the node program does, over the wire server).
   */
  async addInstance(nodeGroup: string, ctx: ProviderContext): Promise<Instance> {
    const set = await this.scaleSetOfGroup(nodeGroup, ctx);
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    const { compute } = await this.clients(subscription);
    let model: VirtualMachineScaleSet;
    try {
      model = await compute.virtualMachineScaleSets.get(resourceGroup, name);
    } catch (err) {
      throw toUserError(err, `reading scale set ${name}`);
    }
    if (
      this.options.image &&
      imageOf(model.virtualMachineProfile?.storageProfile?.imageReference) !== this.options.image
    ) {
      ctx.progress?.(`setting the image of ${name} to ${this.options.image}`);
      try {
        await compute.virtualMachineScaleSets.update(
          resourceGroup,
          name,
          { virtualMachineProfile: { storageProfile: { imageReference: imageReference(this.options.image) } } },
          lroOptions(this.options, ctx.signal),
        );
      } catch (err) {
        throw toUserError(err, `setting the image of scale set ${name}`);
      }
    }
    const before = new Set((await this.membersOf(set)).map((m) => m.id.toLowerCase()));
    await this.setCapacity(set, (model.sku?.capacity ?? before.size) + 1, ctx);
    const added = (await this.membersOf(set)).find((m) => !before.has(m.id.toLowerCase()));
    if (!added)
      throw new UserError(`Scale set ${name} did not add a VM.`, {
        hint: 'Check the scale set in the Azure portal; `constellation status` shows the nodes.',
      });
    return toInstance(added, set);
  }

  /** Deletes exactly this VM; the scale set's capacity goes down by one with it. Gone already: nothing to do. */
  async removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    const { set, instanceId } = await this.scaleSetOf(await this.vmId(id, ctx), ctx);
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    ctx.progress?.(`deleting VM ${instanceId} of ${name}`);
    try {
      const { compute } = await this.clients(subscription);
      await compute.virtualMachineScaleSetVMs.delete(
        resourceGroup,
        name,
        instanceId,
        lroOptions(this.options, ctx.signal),
      );
    } catch (err) {
      if (!isNotFound(err)) throw toUserError(err, `deleting VM ${instanceId} of scale set ${name}`);
    }
  }

  /**
   * Takes the VM's NIC out of the load balancer's backend pool: the VM's own network configuration (the model's,
   * without backend pools) replaces the model's for this VM alone; the VM keeps running until removeInstance.
   */
  async drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    const { set, instanceId } = await this.scaleSetOf(await this.vmId(id, ctx), ctx);
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    const { compute } = await this.clients(subscription);
    let vm: VirtualMachineScaleSetVM;
    let model: VirtualMachineScaleSet;
    try {
      [vm, model] = await Promise.all([
        compute.virtualMachineScaleSetVMs.get(resourceGroup, name, instanceId),
        compute.virtualMachineScaleSets.get(resourceGroup, name),
      ]);
    } catch (err) {
      if (isNotFound(err)) return;
      throw toUserError(err, `reading VM ${instanceId} of scale set ${name}`);
    }
    const current =
      vm.networkProfileConfiguration?.networkInterfaceConfigurations ??
      model.virtualMachineProfile?.networkProfile?.networkInterfaceConfigurations ??
      [];
    if (
      !current.some((nic) => nic.ipConfigurations?.some((ip) => (ip.loadBalancerBackendAddressPools ?? []).length > 0))
    )
      return;
    const drained = current.map((nic) => ({
      ...nic,
      ipConfigurations: (nic.ipConfigurations ?? []).map((ip) => ({ ...ip, loadBalancerBackendAddressPools: [] })),
    }));
    ctx.progress?.(`taking VM ${instanceId} of ${name} out of the load balancer`);
    try {
      await compute.virtualMachineScaleSetVMs.update(
        resourceGroup,
        name,
        instanceId,
        { location: vm.location, networkProfileConfiguration: { networkInterfaceConfigurations: drained } },
        lroOptions(this.options, ctx.signal),
      );
    } catch (err) {
      throw toUserError(err, `taking VM ${instanceId} of scale set ${name} out of the load balancer`);
    }
  }

  /** The scale sets stop carrying the init-secret hash tag, which nodes read from IMDS: no VM added later serves Init. */
  async markInitialized(ctx: ProviderContext): Promise<void> {
    for (const set of await this.scaleSets(ctx)) {
      const { subscription, resourceGroup, name } = parseResourceId(set.id);
      const { compute } = await this.clients(subscription);
      try {
        const { tags = {} } = await compute.virtualMachineScaleSets.get(resourceGroup, name);
        if (!(TAG_INIT_SECRET_HASH in tags)) continue;
        const { [TAG_INIT_SECRET_HASH]: _, ...rest } = tags;
        await compute.virtualMachineScaleSets.update(
          resourceGroup,
          name,
          { tags: rest },
          lroOptions(this.options, ctx.signal),
        );
      } catch (err) {
        throw toUserError(err, `removing the init-secret hash from scale set ${name}`);
      }
    }
  }

  /** An instance id, or (as a fallback) the name `listInstances` gives it. */
  private async vmId(idOrName: string, ctx: ProviderContext): Promise<string> {
    if (idOrName.includes('/virtualMachines/')) return idOrName;
    const found = (await this.listInstances(ctx)).find((i) => i.name === idOrName);
    if (!found)
      throw new UserError(`This cluster has no instance named ${idOrName}.`, {
        hint: "`constellation status` lists the cluster's instances.",
      });
    return found.id;
  }

  private async scaleSetOfGroup(nodeGroup: string, ctx: ProviderContext): Promise<RecordedResource> {
    const sets = await this.scaleSets(ctx);
    const set = sets.find((s) => (s.data as RecordData | undefined)?.nodeGroup === nodeGroup);
    if (!set) {
      const known = sets.map((s) => (s.data as RecordData | undefined)?.nodeGroup).join(', ');
      throw new UserError(`Node group "${nodeGroup}" is not part of this cluster.`, {
        hint: `Node groups: ${known || 'none'}.`,
      });
    }
    return set;
  }
}

function toInstance(member: ScaleSetMember, set: RecordedResource): Instance {
  const data = set.data as RecordData | undefined;
  return {
    id: member.id,
    name: member.computerName,
    role: data?.role === 'control-plane' ? 'control-plane' : 'worker',
    nodeGroup: data?.nodeGroup ?? '',
    privateIp: member.privateIp,
    state: member.state,
    ...(member.createdAt ? { createdAt: member.createdAt } : {}),
    ...(member.image ? { image: member.image } : {}),
  };
}
