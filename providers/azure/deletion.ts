/**
 * Deleting what the Azure provider recorded: one typed SDK call per resource kind, resources already gone
 * count as deleted, and the shared reverse-dependency deleter (../common/delete-order.ts) that runs independent
 * deletions concurrently while a resource is only deleted after everything that uses it: its recorded dependents,
 * and by kind (scale sets before the load balancer and network, the network before the NAT gateway and security
 * group, public IPs after their users, the resource group last). Shared by terminate and `iam destroy`.
 */
import type { RecordedResource, ResourceJournal } from '../contract.js';
import type { AzureClients, AzureIamClients } from './clients.js';
import { isNotFound, toUserError } from './errors.js';
import { parseResourceId, type AzureResourceKind } from './plan.js';
import { deleteInReverseDependencyOrder } from '../common/delete-order.js';
import { TaskGraphError } from '../common/task-graph.js';

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
 * recorded one as soon as it is gone (so an interrupted run continues where it stopped). A failure rejects with
 * the first failed deletion's own error, after the deletions already running have finished.
 */
export async function deleteAll(
  resources: RecordedResource[],
  recordedIds: Set<string>,
  ctx: DeletionContext,
): Promise<void> {
  const rank = (r: RecordedResource) => DELETE_RANK[r.kind as AzureResourceKind];
  try {
    await deleteInReverseDependencyOrder(
      resources.filter((r) => isAzureKind(r.kind)),
      {
        deleteOne: (resource) => deleteResource(resource, ctx),
        journal: ctx.journal,
        forget: (resource) => recordedIds.has(resource.id),
        // A lower rank goes first, unless the record says the higher-ranked resource is the one using it.
        deleteBefore: (first, then) => rank(first) < rank(then) && !(then.dependsOn ?? []).includes(first.id),
        describe: (resource) =>
          `${resource.kind.replace('azure:', '')} ${resource.name ?? parseResourceId(resource.id).name}`,
        progress: ctx.progress,
        signal: ctx.signal,
      },
    );
  } catch (err) {
    throw err instanceof TaskGraphError ? err.cause : err;
  }
}
