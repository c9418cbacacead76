/**
 * The Azure InfrastructureProvider (CLI side): creates the plan of ./plan.ts with the official SDKs, each
 * resource as soon as the ones it depends on exist, and records every resource in the journal the moment Azure
 * accepts it (status "accepted"), then again when it is ready (with its outputs). Before the first PUT, the
 * subscription is registered for the resource providers the cluster needs (./resource-providers.ts). A re-run skips what is ready
 * and PUTs the rest again, which continues an interrupted create. Terminate deletes what the journal holds (and,
 * with byTag, whatever else in the resource group carries the cluster's uid tag) through ./deletion.ts.
 */
import type {
  CreateRequest,
  CreateResult,
  Instance,
  InfrastructureProvider,
  ProviderContext,
  RecordedResource,
  TerminateOptions,
} from '../contract.js';
import { UserError } from '../../lib/errors.js';
import { createAzureClients, type AzureClients } from './clients.js';
import { deleteAll, isAzureKind } from './deletion.js';
import { checkGalleryImage } from './gallery-image.js';
import { CreateFailedError, isNotFound, NoAzureCredentialsError, toUserError } from './errors.js';
import type { AzureProviderOptions } from './options.js';
import type { VirtualMachineScaleSet, VirtualMachineScaleSetVM } from '@azure/arm-compute';
import { imageReference, kindOfType, NODE_SUBNET_CIDR, parseAzureConfig, parseResourceId, planResources, TAG_INIT_SECRET_HASH, TAG_UID, type AzureConfig, type PlannedResource } from './plan.js';
import { collect, imageOf, listScaleSetMembers, type ScaleSetMember } from './scale-set-members.js';
import { CLUSTER_NAMESPACES, ensureRegistered } from './resource-providers.js';
import { throwawaySshPublicKey } from './ssh-key.js';
import { runTaskGraphRethrowingFirst as runTaskGraph } from '../common/task-graph.js';

interface RecordData {
  uid: string;
  status: 'accepted' | 'ready';
  output?: { ipAddress?: string };
  nodeGroup?: string;
  role?: string;
  sshPublicKey?: string;
}

export class AzureInfrastructure implements InfrastructureProvider {
  readonly name = 'azure';
  private readonly clientCache = new Map<string, Promise<AzureClients>>();

  constructor(private readonly options: AzureProviderOptions = {}) {}

  private clients(subscription: string): Promise<AzureClients> {
    let clients = this.clientCache.get(subscription);
    if (!clients) {
      clients = createAzureClients(subscription, this.options);
      this.clientCache.set(subscription, clients);
    }
    return clients;
  }

  private lroOptions(ctx: ProviderContext) {
    return { updateIntervalInMs: this.options.pollIntervalMs, abortSignal: ctx.signal };
  }

  async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    const config = parseAzureConfig(request.providerConfig);
    const plan = planResources(request, config);
    const clients = await this.clients(config.subscription);
    // Nothing is made for an image the VMs cannot boot (./gallery-image.ts).
    await checkGalleryImage(clients, request.image, config.location, request.attestationVariant);
    const recorded = new Map((await ctx.journal.list()).map((r) => [r.id.toLowerCase(), r]));
    const idOfKey = new Map(plan.map((p) => [p.key, p.id]));
    // One throwaway key for all scale sets, generated while the network is being made (off the critical path).
    let sshKey: Promise<string> | undefined;
    const sshPublicKey = () => (sshKey ??= throwawaySshPublicKey());
    if (plan.some((p) => p.kind === 'azure:vmss' && (recorded.get(p.id.toLowerCase())?.data as RecordData | undefined)?.status !== 'ready')) {
      sshPublicKey().catch(() => undefined);
    }

    const registration = {
      id: 'resource-providers',
      dependsOn: [],
      run: async () => {
        try {
          await ensureRegistered(clients.resources, CLUSTER_NAMESPACES, ctx, { sleep: this.options.sleep, pollIntervalMs: this.options.registrationPollMs });
        } catch (err) {
          throw toUserError(err, 'registering the subscription for the resource providers');
        }
        return {};
      },
    };
    const tasks = plan.map((resource) => ({
      id: resource.key,
      // Nothing is PUT before the subscription is registered for the namespaces.
      dependsOn: [registration.id, ...resource.dependsOn],
      run: async () => {
        const previous = recorded.get(resource.id.toLowerCase());
        const data = previous?.data as RecordData | undefined;
        if (data?.status === 'ready') {
          ctx.log.debug('azure: already created', { kind: resource.kind, name: resource.name });
          return data.output ?? {};
        }
        const record = (extra: Partial<RecordData>) =>
          ctx.journal.record({
            kind: resource.kind,
            id: resource.id,
            name: resource.name,
            dependsOn: resource.dependsOn.map((key) => idOfKey.get(key)!),
            data: { ...data, uid: request.uid, ...extra },
          });
        ctx.progress?.(`creating ${describe(resource)}`);
        try {
          const output = await this.createOne(resource, config, clients, ctx, data, record, sshPublicKey);
          ctx.log.debug('azure: created', { kind: resource.kind, name: resource.name });
          return output;
        } catch (err) {
          throw toUserError(err, `creating ${describe(resource)}`);
        }
      },
    }));

    let results: Map<string, unknown>;
    try {
      results = await runTaskGraph([registration, ...tasks], { signal: ctx.signal });
    } catch (err) {
      const user = toUserError(err, 'creating the cluster');
      // Without credentials there is nothing to roll back with; say what to set instead.
      if (user instanceof NoAzureCredentialsError) throw user;
      const anything = (await ctx.journal.list()).some((r) => isAzureKind(r.kind));
      throw new CreateFailedError(`Creating the Azure infrastructure failed: ${user.message}`, {
        canRollBack: anything,
        code: (user as { code?: string }).code,
        causeHint: user.hint,
        cause: err,
      });
    }

    const endpoint = (results.get('public-ip:lb') as RecordData['output'])?.ipAddress;
    if (!endpoint) throw new CreateFailedError('Azure did not assign an address to the load balancer.', { canRollBack: true });
    const scaleSets = Object.fromEntries(plan.filter((p) => p.kind === 'azure:vmss').map((p) => [p.nodeGroup, p.name]));
    const lb = plan.find((p) => p.kind === 'azure:load-balancer')!;
    const nsg = plan.find((p) => p.kind === 'azure:network-security-group')!;
    return {
      clusterEndpoint: endpoint,
      inClusterEndpoint: endpoint,
      apiServerCertSANs: [endpoint],
      ipCidrNode: NODE_SUBNET_CIDR,
      providerState: {
        subscription: config.subscription,
        resourceGroup: config.resourceGroup,
        location: config.location,
        loadBalancerName: lb.name,
        networkSecurityGroupName: nsg.name,
        userAssignedIdentity: config.userAssignedIdentity,
        scaleSets,
      },
    };
  }

  /** Creates one planned resource; `record` writes its journal entry. Returns the outputs later tasks need. */
  private async createOne(
    resource: PlannedResource,
    config: AzureConfig,
    clients: AzureClients,
    ctx: ProviderContext,
    previous: RecordData | undefined,
    record: (extra: Partial<RecordData>) => Promise<void>,
    newSshPublicKey: () => Promise<string>,
  ): Promise<RecordData['output']> {
    const rg = config.resourceGroup;
    const lro = this.lroOptions(ctx);
    // Classic SDK clients: begin* resolves once Azure accepted the request; record, then wait for completion.
    const putAndWait = async <T>(begin: () => Promise<{ pollUntilDone(): Promise<T> }>): Promise<T> => {
      const poller = await begin();
      await record({ status: 'accepted' });
      return poller.pollUntilDone();
    };
    switch (resource.kind) {
      case 'azure:resource-group': {
        // The resource group usually exists (made by `iam create azure`); only one we made is ours to delete.
        if (!previous && (await clients.resources.resourceGroups.checkExistence(rg)).body) return {};
        await clients.resources.resourceGroups.createOrUpdate(rg, resource.body);
        await record({ status: 'ready' });
        return {};
      }
      case 'azure:public-ip': {
        const ip = await putAndWait(() => clients.network.publicIPAddresses.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        const output = { ipAddress: ip.ipAddress };
        await record({ status: 'ready', output });
        return output;
      }
      case 'azure:nat-gateway':
        await putAndWait(() => clients.network.natGateways.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        break;
      case 'azure:network-security-group':
        await putAndWait(() => clients.network.networkSecurityGroups.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        break;
      case 'azure:vnet':
        await putAndWait(() => clients.network.virtualNetworks.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        break;
      case 'azure:load-balancer':
        await putAndWait(() => clients.network.loadBalancers.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        break;
      case 'azure:vmss': {
        // Reuse the key of an accepted scale set: Azure refuses to change the SSH keys of an existing one.
        const sshPublicKey = previous?.sshPublicKey ?? (await newSshPublicKey());
        const poller = clients.compute.virtualMachineScaleSets.createOrUpdate(rg, resource.name, resource.body(sshPublicKey), lro);
        await poller.submitted();
        const extra = { nodeGroup: resource.nodeGroup, role: resource.role, sshPublicKey };
        await record({ status: 'accepted', ...extra });
        await poller;
        await record({ status: 'ready', ...extra });
        return {};
      }
      default:
        throw new Error(`no create step for ${(resource as PlannedResource).kind}`);
    }
    await record({ status: 'ready' });
    return {};
  }

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
    const lists = await Promise.all(sets.map(async (set) => (await this.membersOf(set)).map((m) => toInstance(m, set))));
    return lists.flat();
  }

  /** The recorded scale set an instance id (.../virtualMachineScaleSets/{set}/virtualMachines/{n}) belongs to. */
  private async scaleSetOf(id: string, ctx: ProviderContext): Promise<{ set: RecordedResource; instanceId: string }> {
    const match = /^(.*\/virtualMachineScaleSets\/[^/]+)\/virtualMachines\/([^/]+)$/i.exec(id);
    const set = match && (await this.scaleSets(ctx)).find((s) => s.id.toLowerCase() === match[1].toLowerCase());
    if (!match || !set) {
      throw new UserError(`"${id}" is not a VM of this cluster's scale sets.`, {
        hint: '`constellation status` lists the cluster\'s instances and their ids.',
      });
    }
    return { set, instanceId: match[2] };
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0) throw new UserError(`Cannot scale node group ${nodeGroup} to ${count}: use a whole number >= 0.`);
    const sets = await this.scaleSets(ctx);
    const set = sets.find((s) => (s.data as RecordData | undefined)?.nodeGroup === nodeGroup);
    if (!set) {
      const known = sets.map((s) => (s.data as RecordData | undefined)?.nodeGroup).join(', ');
      throw new UserError(`Node group "${nodeGroup}" is not part of this cluster.`, { hint: `Node groups: ${known || 'none'}.` });
    }
    await this.setCapacity(set, count, ctx);
  }

  private async setCapacity(set: RecordedResource, capacity: number, ctx: ProviderContext): Promise<void> {
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    ctx.progress?.(`scaling ${name} to ${capacity}`);
    try {
      const { compute } = await this.clients(subscription);
      await compute.virtualMachineScaleSets.update(resourceGroup, name, { sku: { capacity } }, this.lroOptions(ctx));
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
    if (this.options.image && imageOf(model.virtualMachineProfile?.storageProfile?.imageReference) !== this.options.image) {
      ctx.progress?.(`setting the image of ${name} to ${this.options.image}`);
      try {
        await compute.virtualMachineScaleSets.update(resourceGroup, name, { virtualMachineProfile: { storageProfile: { imageReference: imageReference(this.options.image) } } }, this.lroOptions(ctx));
      } catch (err) {
        throw toUserError(err, `setting the image of scale set ${name}`);
      }
    }
    const before = new Set((await this.membersOf(set)).map((m) => m.id.toLowerCase()));
    await this.setCapacity(set, (model.sku?.capacity ?? before.size) + 1, ctx);
    const added = (await this.membersOf(set)).find((m) => !before.has(m.id.toLowerCase()));
    if (!added) throw new UserError(`Scale set ${name} did not add a VM.`, { hint: 'Check the scale set in the Azure portal; `constellation status` shows the nodes.' });
    return toInstance(added, set);
  }

  /** Deletes exactly this VM; the scale set's capacity goes down by one with it. Gone already: nothing to do. */
  async removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    const { set, instanceId } = await this.scaleSetOf(await this.vmId(id, ctx), ctx);
    const { subscription, resourceGroup, name } = parseResourceId(set.id);
    ctx.progress?.(`deleting VM ${instanceId} of ${name}`);
    try {
      const { compute } = await this.clients(subscription);
      await compute.virtualMachineScaleSetVMs.delete(resourceGroup, name, instanceId, this.lroOptions(ctx));
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
      [vm, model] = await Promise.all([compute.virtualMachineScaleSetVMs.get(resourceGroup, name, instanceId), compute.virtualMachineScaleSets.get(resourceGroup, name)]);
    } catch (err) {
      if (isNotFound(err)) return;
      throw toUserError(err, `reading VM ${instanceId} of scale set ${name}`);
    }
    const current = vm.networkProfileConfiguration?.networkInterfaceConfigurations ?? model.virtualMachineProfile?.networkProfile?.networkInterfaceConfigurations ?? [];
    if (!current.some((nic) => nic.ipConfigurations?.some((ip) => (ip.loadBalancerBackendAddressPools ?? []).length > 0))) return;
    const drained = current.map((nic) => ({ ...nic, ipConfigurations: (nic.ipConfigurations ?? []).map((ip) => ({ ...ip, loadBalancerBackendAddressPools: [] })) }));
    ctx.progress?.(`taking VM ${instanceId} of ${name} out of the load balancer`);
    try {
      await compute.virtualMachineScaleSetVMs.update(resourceGroup, name, instanceId, { location: vm.location, networkProfileConfiguration: { networkInterfaceConfigurations: drained } }, this.lroOptions(ctx));
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
        await compute.virtualMachineScaleSets.update(resourceGroup, name, { tags: rest }, this.lroOptions(ctx));
      } catch (err) {
        throw toUserError(err, `removing the init-secret hash from scale set ${name}`);
      }
    }
  }

  /** An instance id, or (as a fallback) the name `listInstances` gives it. */
  private async vmId(idOrName: string, ctx: ProviderContext): Promise<string> {
    if (idOrName.includes('/virtualMachines/')) return idOrName;
    const found = (await this.listInstances(ctx)).find((i) => i.name === idOrName);
    if (!found) throw new UserError(`This cluster has no instance named ${idOrName}.`, { hint: '`constellation status` lists the cluster\'s instances.' });
    return found.id;
  }

  private async scaleSetOfGroup(nodeGroup: string, ctx: ProviderContext): Promise<RecordedResource> {
    const sets = await this.scaleSets(ctx);
    const set = sets.find((s) => (s.data as RecordData | undefined)?.nodeGroup === nodeGroup);
    if (!set) {
      const known = sets.map((s) => (s.data as RecordData | undefined)?.nodeGroup).join(', ');
      throw new UserError(`Node group "${nodeGroup}" is not part of this cluster.`, { hint: `Node groups: ${known || 'none'}.` });
    }
    return set;
  }

  async terminate(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    const recorded = (await ctx.journal.list()).filter((r) => isAzureKind(r.kind));
    if (recorded.length === 0) return;
    const { subscription, resourceGroup } = parseResourceId(recorded[0].id);
    const clients = await this.clients(subscription);
    const resources = [...recorded];
    if (options.byTag) resources.push(...(await this.taggedExtras(clients, resourceGroup, recorded)));
    await deleteAll(resources, new Set(recorded.map((r) => r.id)), {
      clients,
      journal: ctx.journal,
      pollIntervalMs: this.options.pollIntervalMs,
      signal: ctx.signal,
      progress: ctx.progress,
    });
  }

  /** Resources in the cluster's resource group that carry its uid tag but are not in the journal. */
  private async taggedExtras(clients: AzureClients, resourceGroup: string, recorded: RecordedResource[]): Promise<RecordedResource[]> {
    const uid = recorded.map((r) => (r.data as RecordData | undefined)?.uid).find(Boolean);
    if (!uid) return [];
    const known = new Set(recorded.map((r) => r.id.toLowerCase()));
    try {
      const tagged = await collect(
        clients.resources.resources.listByResourceGroup(resourceGroup, { filter: `tagName eq '${TAG_UID}' and tagValue eq '${uid}'` }),
      );
      return tagged.flatMap((r) => {
        const kind = r.type ? kindOfType(r.type) : undefined;
        return r.id && kind && !known.has(r.id.toLowerCase()) ? [{ kind, id: r.id, name: r.name }] : [];
      });
    } catch (err) {
      if (isNotFound(err)) return [];
      throw toUserError(err, `listing the resources tagged ${TAG_UID}=${uid}`);
    }
  }
}

function describe(resource: PlannedResource): string {
  return `${resource.kind.replace('azure:', '')} ${resource.name}`;
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
