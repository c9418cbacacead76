/**
 * Who an attested azure-* node is (ValidatorDeps `azureInstanceIdentity`, lib/attestation/variants/cloud-common.ts):
 * the scale set VM named by the resource id and vmId that IMDS gave the measured node program (its attestation's
 * instanceInfo.identity, covered by the quote), read from ARM. Only a VM of a scale set tagged with this cluster's
 * uid, in the join service's own subscription, whose vmId is the one the node read, is named: with its computer
 * name (the node name), its private address and the role its scale set's tag gives it. Any other VM (another
 * cluster's, one ARM does not know, or one whose instance id now belongs to a new VM) is named by nobody, so it gets
 * no control-plane ticket.
 */
import type { AttestedInstance } from '../../lib/attestation/types.js';
import type { AzureInstanceIdentity } from '../../lib/attestation/variants/cloud-common.js';
import { createAzureClients, type AzureClients } from './clients.js';
import { isNotFound, toUserError } from './errors.js';
import type { AzureProviderOptions } from './options.js';
import { parseResourceId, TAG_ROLE, TAG_UID } from './plan.js';
import { listScaleSetMembers } from './scale-set-members.js';

/** .../virtualMachineScaleSets/{set}/virtualMachines/{instanceId} */
const SCALE_SET_VM = /\/providers\/Microsoft\.Compute\/virtualMachineScaleSets\/([^/]+)\/virtualMachines\/([^/]+)$/i;

export function azureInstanceIdentity(
  options: AzureProviderOptions,
  cluster: () => Promise<{ uid: string; subscriptionId: string }>,
): AzureInstanceIdentity {
  let clients: Promise<AzureClients> | undefined;
  return async ({ resourceId, vmId }) => {
    const match = SCALE_SET_VM.exec(resourceId);
    if (!match) return undefined;
    const { subscription, resourceGroup } = parseResourceId(resourceId);
    const { uid, subscriptionId } = await cluster();
    if (subscription.toLowerCase() !== subscriptionId.toLowerCase()) return undefined;
    const [, scaleSet, instanceId] = match as unknown as [string, string, string];
    const api = await (clients ??= createAzureClients(subscriptionId, options));
    try {
      const set = await api.compute.virtualMachineScaleSets.get(resourceGroup, scaleSet);
      if (set.tags?.[TAG_UID] !== uid) return undefined;
      const vm = await api.compute.virtualMachineScaleSetVMs.get(resourceGroup, scaleSet, instanceId);
      if (!vm.vmId || vm.vmId.toLowerCase() !== vmId.toLowerCase()) return undefined;
      const member = (await listScaleSetMembers(api, resourceGroup, scaleSet)).find(
        (m) => m.id.toLowerCase() === resourceId.toLowerCase(),
      );
      const role = set.tags?.[TAG_ROLE];
      const identity: AttestedInstance = {
        name: vm.osProfile?.computerName ?? member?.computerName ?? vm.name ?? instanceId,
        ...(role === 'control-plane' || role === 'worker' ? { role } : {}),
        ...(member?.privateIp ? { addresses: [member.privateIp] } : {}),
      };
      return identity;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw toUserError(err, `looking up VM ${resourceId}`);
    }
  };
}
