/**
 * Cloud in a box, AWS: `upgrade apply` of a 3 + 2 cluster to a new AMI (test/e2e/cloud-box/aws-scenarios.ts), as
 * rollout ÷ (5 × one replacement). One replacement is the median of the rollout's own steps (from "adding a node" to
 * "replaced", as upgrade apply reports them: add, wait until joined, verify, drain, etcd member out, remove), so the
 * ratio is what the rollout costs beyond its five replacements (the measurement write, status rounds, the final
 * check). The fake is configured with no latency, no operation time and no consistency window here, so there is no
 * fake delay to subtract. Target ≤ 1.2.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withWorkspaceSession } from '../cli/cluster/session.js';
import { upgradeCluster } from '../cli/cluster/upgrade.js';
import { makeSnpTestCa } from '../test/attestation/snp/fixtures.js';
import { NEW_IMAGE, editConfig, publishImages, upAwsCluster } from '../test/e2e/cloud-box/aws-scenarios.js';
import { CloudBox } from '../test/e2e/cloud-box/box.js';

const TARGET = 1.2;

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
    drainMs: 0,
    controlPlanes: 3,
    workers: 2,
  });
  try {
    for (let i = 0; ; i++) {
      const status = await cluster.cloud.status();
      if (status.nodes.length === 5 && status.nodes.every((n) => n.state === 'joined')) break;
      if (i > 480) throw new Error(`the cluster did not form: ${JSON.stringify(status.nodes.map((n) => n.state))}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const { index } = await publishImages(workspace, [...cluster.cloud.fake.state.instances.values()][0]!.imageId);
    await editConfig(workspace, (doc) => doc.setIn(['image'], NEW_IMAGE));
    const validatorDeps = { ...(await cluster.cloud.validatorDeps()), amdRoots: ca.roots };
    const started = new Map<string, number>();
    const steps: number[] = [];
    const t0 = Date.now();
    await withWorkspaceSession(workspace, 'upgrade apply', ({ workspaceDir, journal, log }) =>
      upgradeCluster({
        workspaceDir,
        log,
        journal,
        provider: cluster.infrastructure(NEW_IMAGE),
        imageSource: { index },
        validatorDeps,
        joinTimeoutMs: 180_000,
        pollIntervalMs: 200,
        progress: (line) => {
          const adding = /^adding a node to \S+ to replace (\S+)$/.exec(line);
          if (adding) started.set(adding[1]!, Date.now());
          const replaced = /^replaced (\S+) with/.exec(line);
          if (replaced && started.has(replaced[1]!)) steps.push(Date.now() - started.get(replaced[1]!)!);
        },
      }),
    );
    const rollout = (Date.now() - t0) / 1000;
    const sorted = [...steps].sort((a, b) => a - b);
    const one = sorted[Math.floor(sorted.length / 2)]! / 1000;
    const ratio = rollout / (5 * one);
    out(
      `aws-sev-snp rolling upgrade 3+2: rollout ${rollout.toFixed(2)} s, one replacement (median of ${steps.length}) ${one.toFixed(2)} s, fake delay 0 s`,
    );
    out(
      `rollout ÷ (5 × one replacement) = ${ratio.toFixed(2)} (target ≤ ${TARGET}: ${ratio <= TARGET ? 'met' : 'not met'})`,
    );
  } finally {
    await cluster.close();
    await box.close();
    await cluster.cloud.close();
    await fs.rm(root, { recursive: true, force: true });
  }
}
