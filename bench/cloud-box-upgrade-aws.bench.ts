/**
 * Cloud in a box, AWS: `upgrade apply` of a 3 + 2 cluster to a new AMI (test/e2e/cloud-box/aws-scenarios.ts), as
 * rollout ÷ (5 × one replacement), fake delay subtracted (bench/support/cloud-box-upgrade.ts). The fake is configured
 * with no latency, no operation time and no consistency window here, so there is no fake delay to subtract.
 * Target ≤ 1.2.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeSnpTestCa } from '../test/attestation/snp/fixtures.js';
import { NEW_IMAGE, upAwsCluster } from '../test/e2e/cloud-box/aws-scenarios.js';
import { CloudBox } from '../test/e2e/cloud-box/box.js';
import { measureUpgrade, waitForFiveJoined } from './support/cloud-box-upgrade.js';

export default async function cloudBoxUpgradeAwsBench(out: (line: string) => void): Promise<void> {
  const ca = makeSnpTestCa('Milan');
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-bench-box-upgrade-aws-'));
  const workspace = path.join(root, 'workspace');
  const box = new CloudBox(path.join(root, 'vms'));
  const cluster = await upAwsCluster({
    workspace,
    box,
    ca,
    octet: 20 + Math.floor(Math.random() * 200),
    consistencyMs: 0,
    consistencyMisses: 0,
    drainMs: 0,
    controlPlanes: 3,
    workers: 2,
  });
  try {
    await waitForFiveJoined(cluster);
    await measureUpgrade(cluster, ca, workspace, { variant: 'aws-sev-snp', image: NEW_IMAGE }, out);
  } finally {
    await cluster.close();
    await box.close();
    await cluster.cloud.close();
    await fs.rm(root, { recursive: true, force: true });
  }
}
