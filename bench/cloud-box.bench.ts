/**
 * Cloud in a box, 1 control plane + 2 workers per cloud (aws-sev-snp, gcp-sev-snp, azure-sev-snp): wall time of
 * `create` + booting the instances + `init` against each cloud's fake (test/e2e/cloud-box/), minus what the fake
 * itself waited on purpose (configured latency, long-running operations), printed beside the local provider's
 * `mini up` 1+2 through the built CLI. No target is set for it; the figure says what our own code costs per cloud.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeSnpTestCa } from '../test/attestation/snp/fixtures.js';
import { CloudBox } from '../test/e2e/cloud-box/box.js';
import { BOX_CLOUDS } from '../test/e2e/cloud-box/clouds.js';
import { upCluster } from '../test/e2e/cloud-box/scenario.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');

function miniUp(): number {
  const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-box-mini-'));
  try {
    const start = process.hrtime.bigint();
    const res = spawnSync(process.execPath, [CLI, 'mini', 'up', '-w', '2', '-C', ws], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    if (res.status !== 0) throw new Error(`mini up: ${res.stderr.toString()}`);
    return Number(process.hrtime.bigint() - start) / 1e9;
  } finally {
    spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
    rmSync(ws, { recursive: true, force: true });
  }
}

export default async function cloudBoxBench(out: (line: string) => void): Promise<void> {
  const ca = makeSnpTestCa('Milan');
  const mini = miniUp();
  for (const { name, make } of BOX_CLOUDS) {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), `cl-bench-box-${name}-`));
    const workspace = path.join(root, 'workspace');
    const box = new CloudBox(path.join(root, 'vms'));
    const cloud = await make(workspace, 20 + Math.floor(Math.random() * 200));
    try {
      const { elapsedMs } = await upCluster(cloud, box, ca, workspace, name);
      const fakeMs = cloud.fakeDelayMs();
      const own = (elapsedMs - fakeMs) / 1000;
      out(
        `${cloud.variant} 1+2 create + init: ${own.toFixed(2)} s (wall ${(elapsedMs / 1000).toFixed(2)} s, fake's own delay ${(fakeMs / 1000).toFixed(2)} s subtracted) | local mini up 1+2: ${mini.toFixed(2)} s`,
      );
      await cloud.terminate();
    } finally {
      await box.close();
      await cloud.close();
      await fs.rm(root, { recursive: true, force: true });
    }
  }
}
