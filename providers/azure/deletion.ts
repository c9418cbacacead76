/**
 * Deleting what the Azure provider recorded: one typed SDK call per resource kind, resources already gone
 * count as deleted, and a deletion graph that runs independent deletions concurrently while a resource is only
 * deleted after everything that uses it (scale sets before the load balancer and network, the network before
 * the NAT gateway and security group, public IPs after their users, the resource group last).
 * Shared by terminate and `iam destroy`.
 */
import type { RecordedResource, ResourceJournal } from '../contract.js';
import type { AzureClients, AzureIamClients } from './clients.js';
import { isNotFound, toUserError } from './errors.js';
import { parseResourceId, type AzureResourceKind } from './plan.js';
import { runTaskGraph, type GraphTask } from './task-graph.js';

/** Lower ranks are deleted first: nothing of a higher rank uses a resource of a lower one. */
const DELETE_RANK: Record<AzureResourceKind, number> = {
  'azure:vmss': 0,
  'azure:role-assignment': 0,
  'azure:load-balancer': 1,
  'azure:vnet': 1,
  'azure:user-assigned-identity': 1,
  'azure:nat-gateway': 2,
  'azure:network-security-group': 2,
  'azure:public-ip': 3,
  'azure:resource-group': 4,
};

export function isAzureKind(kind: string): kind is AzureResourceKind {
  return kind in DELETE_RANK;
}

export interface DeletionContext {
  clients: Partial<AzureClients & AzureIamClients>;
  /** Only resources that are in the journal are removed from it. */
  journal: ResourceJournal;
  pollIntervalMs?: number;
  signal?: AbortSignal;
  progress?: (message: string) => void;
}

/** Deletes one resource; a resource that no longer exists is not an error. */
export async function deleteResource(resource: RecordedResource, ctx: DeletionContext): Promise<void> {
  const lro = { updateIntervalInMs: ctx.pollIntervalMs, abortSignal: ctx.signal };
  const { clients } = ctx;
  const { resourceGroup, name } = parseResourceId(resource.id);
  const need = <K extends keyof DeletionContext['clients']>(key: K): NonNullable<DeletionContext['clients'][K]> => {
    const client = clients[key];
    if (!client) throw new Error(`deleting ${resource.kind} needs the ${key} client`);
    return client as NonNullable<DeletionContext['clients'][K]>;
  };
  try {
    switch (resource.kind as AzureResourceKind) {
      case 'azure:vmss':
        await need('compute').virtualMachineScaleSets.delete(resourceGroup, name, lro);
        break;
      case 'azure:load-balancer':
        await need('network').loadBalancers.beginDeleteAndWait(resourceGroup, name, lro);
        break;
      case 'azure:vnet':
        await need('network').virtualNetworks.beginDeleteAndWait(resourceGroup, name, lro);
        break;
      case 'azure:nat-gateway':
        await need('network').natGateways.beginDeleteAndWait(resourceGroup, name, lro);
        break;
      case 'azure:network-security-group':
        await need('network').networkSecurityGroups.beginDeleteAndWait(resourceGroup, name, lro);
        break;
      case 'azure:public-ip':
        await need('network').publicIPAddresses.beginDeleteAndWait(resourceGroup, name, lro);
        break;
      case 'azure:resource-group':
        await need('resources').resourceGroups.beginDeleteAndWait(resourceGroup, lro);
        break;
      case 'azure:user-assigned-identity':
        await need('msi').userAssignedIdentities.delete(resourceGroup, name);
        break;
      case 'azure:role-assignment':
        await need('authorization').roleAssignments.deleteById(resource.id);
        break;
      default:
        throw new Error(`unknown Azure resource kind ${resource.kind}`);
    }
  } catch (err) {
    if (!isNotFound(err)) throw toUserError(err, `deleting ${resource.kind.replace('azure:', '')} ${name}`);
  }
}

/**
 * Deletes the resources in reverse dependency order, concurrently where nothing orders them, and forgets each
 * recorded one as soon as it is gone (so an interrupted run continues where it stopped).
 */
export async function deleteAll(resources: RecordedResource[], recordedIds: Set<string>, ctx: DeletionContext): Promise<void> {
  const known = resources.filter((r) => isAzureKind(r.kind));
  const rank = (r: RecordedResource) => DELETE_RANK[r.kind as AzureResourceKind];
  const tasks: GraphTask[] = known.map((resource) => ({
    id: resource.id,
    // A resource waits for the deletion of everything that uses it: its recorded dependents, and resources of
    // lower rank (unless the record says it is the one using them).
    dependsOn: known
      .filter((other) => {
        if (other === resource) return false;
        if ((other.dependsOn ?? []).includes(resource.id)) return true;
        return rank(other) < rank(resource) && !(resource.dependsOn ?? []).includes(other.id);
      })
      .map((other) => other.id),
    run: async () => {
      ctx.progress?.(`deleting ${resource.kind.replace('azure:', '')} ${resource.name ?? parseResourceId(resource.id).name}`);
      await deleteResource(resource, ctx);
      if (recordedIds.has(resource.id)) await ctx.journal.remove(resource.id);
    },
  }));
  await runTaskGraph(tasks, { signal: ctx.signal });
}
