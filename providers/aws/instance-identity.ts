/**
 * Who an attested aws-sev-snp node is (ValidatorDeps `awsInstanceIdentity`, lib/attestation/variants/aws-sev-snp.ts):
 * the instance of the identity document its attestation carries, described by EC2 through the provider's clients.
 * Only an instance tagged with this cluster's constellation-uid is named, with its private DNS name (the node name),
 * its private address and the role its constellation-role tag gives it (the auto scaling group of its node group set
 * it); any other instance (another cluster's, or one EC2 does not know) is named by nobody, so it gets no
 * control-plane ticket.
 */
import { DescribeInstancesCommand, type DescribeInstancesCommandOutput } from '@aws-sdk/client-ec2';
import type { AttestedInstance } from '../../lib/attestation/types.js';
import type { AwsInstanceIdentity } from '../../lib/attestation/variants/cloud-common.js';
import { AwsClients } from './clients.js';
import type { AwsProviderOptions } from './options.js';
import { TAG, tagValue } from './resources.js';

export function awsInstanceIdentity(
  options: AwsProviderOptions,
  clusterUid: () => Promise<string>,
): AwsInstanceIdentity {
  const clients = new AwsClients(options);
  return async (instanceId, region) => {
    const out = await clients.send<DescribeInstancesCommandOutput>(
      clients.ec2(options.region ?? region),
      new DescribeInstancesCommand({ Filters: [{ Name: 'instance-id', Values: [instanceId] }] }),
      `Describing instance ${instanceId}`,
    );
    const instance = out.Reservations?.flatMap((r) => r.Instances ?? []).find((i) => i.InstanceId === instanceId);
    if (!instance || tagValue(instance.Tags, TAG.uid) !== (await clusterUid())) return undefined;
    const role = tagValue(instance.Tags, TAG.role);
    const identity: AttestedInstance = {
      name: instance.PrivateDnsName || instanceId,
      ...(role === 'control-plane' || role === 'worker' ? { role } : {}),
      ...(instance.PrivateIpAddress ? { addresses: [instance.PrivateIpAddress] } : {}),
    };
    return identity;
  };
}
