/**
 * Cloud in a box on GCP and Azure, beyond create and init: the same `upgrade apply` and `apply` scaling as on AWS
 * (./aws-scenarios.ts, whose cloud-neutral steps these reuse), with each fake behaving as its cloud documents:
 *   GCP    new instances stay PROVISIONING for a while (currentAction CREATING) before the group reports them
 *          RUNNING; a group resized down deletes victims of its own choosing ("arbitrarily"); deleteInstances lowers
 *          the target size (test/fakes/gcp/compute.ts);
 *   Azure  a new VM stays Creating until its node reports Ready to the wire server, and the scale set's update
 *          finishes only then; a lower capacity deletes by the scale-in policy (highest instance id)
 *          (test/fakes/azure/arm-server.ts).
 * Both fakes also answer some calls with the throttling errors their APIs document (GCP 429 rateLimitExceeded,
 * Azure 429 with Retry-After), which the providers ride out.
 */
import type { SnpTestCa } from '../../attestation/snp/fixtures.js';
import { upBoxCluster, type BoxCluster } from './aws-scenarios.js';
import type { CloudBox } from './box.js';
import { azureCloud, gcpCloud, type AzureBoxCloud, type GcpBoxCloud } from './clouds.js';
import type { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import type { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';

export interface ScenarioOptions {
  workspace: string;
  box: CloudBox;
  ca: SnpTestCa;
  octet: number;
  controlPlanes?: number;
  workers?: number;
}

export type GcpBoxCluster = BoxCluster & { cloud: GcpBoxCloud; infrastructure(image?: string): GcpInfrastructure };
export type AzureBoxCluster = BoxCluster & {
  cloud: AzureBoxCloud;
  infrastructure(image?: string): AzureInfrastructure;
};

/**
 * A GCP cluster in the box; new instances stay PROVISIONING for `instanceBootMs` (default 300). During create every
 * operation runs `createOperationMs` (default 200), so that the concurrent changes to the new network (router, firewall
 * rules) meet resourceNotReady and are retried, however loaded the machine; afterwards operations are done at once (the
 * rollout as its benchmark measures it).
 */
export async function upGcpCluster(
  options: ScenarioOptions & { instanceBootMs?: number; createOperationMs?: number },
): Promise<GcpBoxCluster> {
  const base = await gcpCloud(options.workspace, options.octet, {
    instanceBootMs: options.instanceBootMs ?? 300,
    operationMs: options.createOperationMs ?? 200,
  });
  const cluster = await upBoxCluster(base, 'gcp', options, (image) => base.infrastructureFor(image));
  base.fake.operationMs = 0;
  return cluster;
}

/**
 * An Azure cluster in the box; once it is up, a new VM is Creating until its node reports Ready over the wire server
 * (during create the box boots the nodes only after create returned, so there the fake's guests report at boot).
 */
export async function upAzureCluster(options: ScenarioOptions): Promise<AzureBoxCluster> {
  const base = await azureCloud(options.workspace, options.octet);
  const cluster = await upBoxCluster(base, 'azure', options, (image) => base.infrastructureFor(image));
  base.fake.vmReady = 'wire-server';
  // Azure gives a VM 20 minutes to report; a node in the box reports within seconds, but a loaded machine may take a minute.
  base.fake.provisioningTimeoutMs = 180_000;
  return cluster;
}
