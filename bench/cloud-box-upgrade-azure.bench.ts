/**
 * Cloud in a box, Azure: `upgrade apply` of a 3 + 2 cluster to a new image (test/e2e/cloud-box/gcp-azure-scenarios.ts),
 * as rollout ÷ (5 × one replacement), fake delay subtracted (bench/support/cloud-box-upgrade.ts). The fake: 1 ms per long-running operation (subtracted); a new VM is Creating until its node reports Ready, which is the node's own boot, not fake delay.
 * Target ≤ 1.2.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeSnpTestCa } from '../test/attestation/snp/fixtures.js';
import { CloudBox } from '../test/e2e/cloud-box/box.js';
import { AZ_NEW_IMAGE } from '../test/e2e/cloud-box/clouds.js';
import { upAzureCluster } from '../test/e2e/cloud-box/gcp-azure-scenarios.js';
import { measureUpgrade, waitForFiveJoined } from './support/cloud-box-upgrade.js';

export default async function cloudBoxUpgradeAzureBench(out: (line: string) => void): Promise<void> {
  const ca = makeSnpTestCa('Milan');
  // Short: swtpm's socket path below it, with the cloud's long instance names, must fit a unix socket address.
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-bb-az-'));
  const workspace = path.join(root, 'workspace');
  const box = new CloudBox(path.join(root, 'vms'));
  const cluster = await upAzureCluster({
    workspace,
    box,
    ca,
    octet: 20 + Math.floor(Math.random() * 200),
    controlPlanes: 3,
    workers: 2,
  }).catch(async (err: unknown) => {
    await box.close();
    await fs.rm(root, { recursive: true, force: true });
    throw err;
  });
  try {
    await waitForFiveJoined(cluster);
    await measureUpgrade(cluster, ca, workspace, { variant: 'azure-sev-snp', image: AZ_NEW_IMAGE }, out);
  } finally {
    await cluster.close();
    await box.close();
    await cluster.cloud.close();
    await fs.rm(root, { recursive: true, force: true });
  }
}
