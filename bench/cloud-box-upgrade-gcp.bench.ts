/**
 * Cloud in a box, GCP: `upgrade apply` of a 3 + 2 cluster to a new image (test/e2e/cloud-box/gcp-azure-scenarios.ts),
 * as rollout ÷ (5 × one replacement), fake delay subtracted (bench/support/cloud-box-upgrade.ts). The fake: new
 * instances RUNNING at once (no PROVISIONING window), operations done at once. Target ≤ 1.2.
 */
import { GCP_NEW_IMAGE } from '../test/e2e/cloud-box/clouds.js';
import { upGcpCluster } from '../test/e2e/cloud-box/gcp-azure-scenarios.js';
import { runBoxUpgradeBench } from './support/cloud-box-upgrade.js';

export default async function cloudBoxUpgradeGCPBench(out: (line: string) => void): Promise<void> {
  await runBoxUpgradeBench(
    'gcp',
    (options) => upGcpCluster({ ...options, instanceBootMs: 0 }),
    { variant: 'gcp-sev-snp', image: GCP_NEW_IMAGE },
    out,
  );
}
