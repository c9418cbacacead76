/**
 * Cloud in a box, AWS: `upgrade apply` of a 3 + 2 cluster to a new AMI (test/e2e/cloud-box/aws-scenarios.ts), as
 * rollout ÷ (5 × one replacement), fake delay subtracted (bench/support/cloud-box-upgrade.ts). The fake is configured
 * with no latency, no operation time and no consistency window here, so there is no fake delay to subtract.
 * Target ≤ 1.2.
 */
import { NEW_IMAGE, upAwsCluster } from '../test/e2e/cloud-box/aws-scenarios.js';
import { runBoxUpgradeBench } from './support/cloud-box-upgrade.js';

export default async function cloudBoxUpgradeAwsBench(out: (line: string) => void): Promise<void> {
  await runBoxUpgradeBench(
    'aws',
    (options) => upAwsCluster({ ...options, consistencyMs: 0, consistencyMisses: 0, drainMs: 0 }),
    { variant: 'aws-sev-snp', image: NEW_IMAGE },
    out,
  );
}
