/**
 * The VMs of a scale set with their private IPs: the VM list comes from the compute API, the addresses from
 * the scale set's network interfaces (the network API), matched by VM id. Used by the CLI side (list,
 * describe, replace) and by the node side (peers).
 */
import type { AzureClients } from './clients.js';
import type { InstanceState } from '../contract.js';

export interface ScaleSetMember {
  /** ARM id of the VM: .../virtualMachineScaleSets/{set}/virtualMachines/{instanceId}. */
  id: string;
  instanceId: string;
  /** Host name (the Kubernetes node name). */
  computerName: string;
  privateIp: string;
  state: InstanceState;
  /** When Azure made the VM (ISO 8601). */
  createdAt?: string;
  /** The image reference the VM was made from (gallery image id, as the config names it). */
  image?: string;
}

export function instanceState(provisioningState: string | undefined): InstanceState {
  switch ((provisioningState ?? '').toLowerCase()) {
    case 'succeeded':
      return 'running';
    case 'creating':
    case 'updating':
      return 'pending';
    case 'failed':
      return 'unknown';
    case 'deleting':
    case 'deleted':
      return 'terminated';
    default:
      return 'unknown';
  }
}

export async function listScaleSetMembers(
  clients: Pick<AzureClients, 'compute' | 'network'>,
  resourceGroup: string,
  scaleSet: string,
): Promise<ScaleSetMember[]> {
  const [vms, nics] = await Promise.all([
    collect(clients.compute.virtualMachineScaleSetVMs.list(resourceGroup, scaleSet)),
    collect(clients.network.networkInterfaces.listVirtualMachineScaleSetNetworkInterfaces(resourceGroup, scaleSet)),
  ]);
  const ipByVm = new Map<string, string>();
  for (const nic of nics) {
    const vmId = nic.virtualMachine?.id?.toLowerCase();
    const ip = nic.ipConfigurations?.find((c) => c.primary !== false)?.privateIPAddress;
    if (vmId && ip && (nic.primary !== false || !ipByVm.has(vmId))) ipByVm.set(vmId, ip);
  }
  return vms.map((vm) => ({
    id: vm.id ?? '',
    instanceId: vm.instanceId ?? '',
    computerName: vm.osProfile?.computerName ?? vm.name ?? '',
    privateIp: ipByVm.get((vm.id ?? '').toLowerCase()) ?? '',
    state: instanceState(vm.provisioningState),
    ...(vm.timeCreated ? { createdAt: new Date(vm.timeCreated).toISOString() } : {}),
    ...(imageOf(vm.storageProfile?.imageReference) ? { image: imageOf(vm.storageProfile?.imageReference) } : {}),
  }));
}

export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

/** The config's form of an image reference (the inverse of plan.ts imageReference). */
export function imageOf(
  ref: { id?: string; communityGalleryImageId?: string; sharedGalleryImageId?: string } | undefined,
): string | undefined {
  return ref?.communityGalleryImageId ?? ref?.sharedGalleryImageId ?? ref?.id ?? undefined;
}
