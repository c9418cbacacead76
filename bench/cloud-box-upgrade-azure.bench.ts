/**
 * Cloud in a box, Azure: `upgrade apply` of a 3 + 2 cluster to a new image (test/e2e/cloud-box/gcp-azure-scenarios.ts),
 * as rollout ÷ (5 × one replacement), fake delay subtracted (bench/support/cloud-box-upgrade.ts). The fake: 1 ms per
 * long-running operation (subtracted); a new VM is Creating until its node reports Ready, which is the node's own
 * boot, not fake delay. Target ≤ 1.2.
 */
import { AZ_NEW_IMAGE } from '../test/e2e/cloud-box/clouds.js';
import { upAzureCluster } from '../test/e2e/cloud-box/gcp-azure-scenarios.js';
import { runBoxUpgradeBench } from './support/cloud-box-upgrade.js';

export default async function cloudBoxUpgradeAzureBench(out: (line: string) => void): Promise<void> {
  await runBoxUpgradeBench('az', upAzureCluster, { variant: 'azure-sev-snp', image: AZ_NEW_IMAGE }, out);
}
