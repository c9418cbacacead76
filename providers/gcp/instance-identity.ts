/**
 * Who an attested gcp-sev-es / gcp-sev-snp node is (ValidatorDeps `gcpInstanceIdentity`,
 * lib/attestation/variants/gcp-sev-es.ts): the instance whose shielded VM identity vouched for the quote's AK, read
 * from Compute. Only an instance labelled with this cluster's uid is named, with its name (the node name), its
 * private address and the role its instance template gave it (metadata, ./instances.ts); any other instance
 * (another cluster's, or one Compute does not know) is named by nobody, so it gets no control-plane ticket.
 */
import type { InstancesClient } from '@google-cloud/compute';
import type { AttestedInstance } from '../../lib/attestation/types.js';
import type { GcpInstanceIdentity } from '../../lib/attestation/variants/cloud-common.js';
import { GcpCompute } from './clients.js';
import { isNotFound, toUserError } from './errors.js';
import { toInstanceMetadata } from './gce-instance.js';
import type { GcpProviderOptions } from './options.js';
import { labelValue, LABEL_UID } from './plan.js';

export function gcpInstanceIdentity(
  options: GcpProviderOptions,
  clusterUid: () => Promise<string>,
): GcpInstanceIdentity {
  let api: Promise<GcpCompute> | undefined;
  return async ({ projectId, zone, instanceName }) => {
    const compute = await (api ??= GcpCompute.open(options));
    const instances = compute.client<InstancesClient>('InstancesClient');
    let instance;
    try {
      [instance] = await compute.rawCall(() => instances.get({ project: projectId, zone, instance: instanceName }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw toUserError(`Reading instance ${instanceName}`, err);
    }
    if (instance.labels?.[LABEL_UID] !== labelValue(await clusterUid())) return undefined;
    const self = toInstanceMetadata(instance, projectId);
    const identity: AttestedInstance = {
      name: self.name,
      role: self.role,
      ...(self.vpcIp ? { addresses: [self.vpcIp] } : {}),
    };
    return identity;
  };
}
