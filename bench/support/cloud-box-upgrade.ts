/**
 * The measurement the cloud-box upgrade benches share (bench/cloud-box-upgrade-*.bench.ts): `upgrade apply` of a
 * running 3 + 2 cluster in the box to a new image, as rollout ÷ (5 × one replacement). One replacement is the median
 * of the rollout's own steps (from "adding a node" to "replaced", as upgrade apply reports them: add, wait until
 * joined, verify, drain, etcd member out, remove), so the ratio is what the rollout costs beyond its five
 * replacements (the measurement write, status rounds, the final check). What the fake waited on purpose during the
 * rollout (its configured latency and operation times, BoxCloud.fakeDelayMs) is subtracted: from the rollout, and a
 * fifth of it from one replacement. Target ≤ 1.2. Every progress line of the rollout is printed with its time since
 * the start, and the replacements' times and the rollout's time outside them, so a ratio can be traced to its steps.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withWorkspaceSession } from '../../cli/cluster/session.js';
import { upgradeCluster } from '../../cli/cluster/upgrade.js';
import type { VariantName } from '../../lib/attestation/variant-table.js';
import { loadConfig } from '../../lib/config/index.js';
import { pollUntil } from '../../lib/poll.js';
import { makeSnpTestCa, type SnpTestCa } from '../../test/attestation/snp/fixtures.js';
import { editConfig, publishImages, type BoxCluster } from '../../test/e2e/cloud-box/aws-scenarios.js';
import { CloudBox } from '../../test/e2e/cloud-box/box.js';
import type { ScenarioOptions } from '../../test/e2e/cloud-box/gcp-azure-scenarios.js';

export const UPGRADE_TARGET = 1.2;

/** Waits until the box's 3 + 2 cluster has every node joined. */
export async function waitForFiveJoined(cluster: BoxCluster): Promise<void> {
  let last: string[] = [];
  await pollUntil(
    async () => {
      const status = await cluster.cloud.status();
      last = status.nodes.map((n) => n.state);
      return status.nodes.length === 5 && last.every((state) => state === 'joined') ? true : undefined;
    },
    {
      timeoutMs: 240_000,
      intervalMs: 500,
      onTimeout: () => Promise.reject(new Error(`the cluster did not form: ${JSON.stringify(last)}`)),
    },
  );
}

/**
 * The whole bench for a cloud whose box cluster `up` makes: a 3 + 2 cluster in a temporary folder, every
 * node joined, then measureUpgrade to `target`; the box, the fake and the folder are gone afterwards.
 */
export async function runBoxUpgradeBench(
  cloud: string,
  up: (options: ScenarioOptions) => Promise<BoxCluster>,
  target: { variant: VariantName; image: string },
  out: (line: string) => void,
): Promise<void> {
  const ca = makeSnpTestCa('Milan');
  // Short: swtpm's socket path below it, with the cloud's long instance names, must fit a unix socket address.
  const root = await fs.mkdtemp(path.join(os.tmpdir(), `cl-bb-${cloud}-`));
  const workspace = path.join(root, 'workspace');
  const box = new CloudBox(path.join(root, 'vms'));
  const octet = 20 + Math.floor(Math.random() * 200);
  const cluster = await up({ workspace, box, ca, octet, controlPlanes: 3, workers: 2 }).catch(async (err: unknown) => {
    await box.close();
    await fs.rm(root, { recursive: true, force: true });
    throw err;
  });
  try {
    await waitForFiveJoined(cluster);
    await measureUpgrade(cluster, ca, workspace, target, out);
  } finally {
    await cluster.close();
    await box.close();
    await cluster.cloud.close();
    await fs.rm(root, { recursive: true, force: true });
  }
}

/** Runs the upgrade to `image` and prints the ratio (see the module header). */
export async function measureUpgrade(
  cluster: BoxCluster,
  ca: SnpTestCa,
  workspace: string,
  target: { variant: VariantName; image: string },
  out: (line: string) => void,
): Promise<void> {
  const { index } = await publishImages(workspace, (await loadConfig(workspace)).image, target);
  await editConfig(workspace, (doc) => doc.setIn(['image'], target.image));
  const validatorDeps = { ...(await cluster.cloud.validatorDeps()), amdRoots: ca.roots };
  const started = new Map<string, number>();
  const steps: number[] = [];
  const trace: string[] = [];
  const delayBefore = cluster.cloud.fakeDelayMs();
  const t0 = Date.now();
  await withWorkspaceSession(workspace, 'upgrade apply', ({ workspaceDir, journal, log }) =>
    upgradeCluster({
      workspaceDir,
      log,
      journal,
      provider: cluster.infrastructure(target.image),
      imageSource: { index },
      validatorDeps,
      joinTimeoutMs: 180_000,
      pollIntervalMs: 200,
      progress: (line) => {
        trace.push(`+${((Date.now() - t0) / 1000).toFixed(2)} s ${line}`);
        const adding = /^adding a node to \S+ to replace (\S+)$/.exec(line);
        if (adding) started.set(adding[1]!, Date.now());
        const replaced = /^replaced (\S+) with/.exec(line);
        if (replaced && started.has(replaced[1]!)) steps.push(Date.now() - started.get(replaced[1]!)!);
      },
    }),
  );
  const fakeDelay = (cluster.cloud.fakeDelayMs() - delayBefore) / 1000;
  const rollout = (Date.now() - t0) / 1000;
  for (const line of trace) out(line);
  const sorted = [...steps].sort((a, b) => a - b);
  const one = sorted[Math.floor(sorted.length / 2)]! / 1000;
  const ratio = (rollout - fakeDelay) / (5 * (one - fakeDelay / 5));
  const outside = rollout - steps.reduce((sum, ms) => sum + ms, 0) / 1000;
  out(
    `${target.variant} rolling upgrade 3+2: rollout ${rollout.toFixed(2)} s, one replacement (median of ${steps.length}) ${one.toFixed(2)} s, fake delay ${fakeDelay.toFixed(2)} s`,
  );
  out(
    `replacements ${sorted.map((ms) => (ms / 1000).toFixed(1)).join(', ')} s; outside them (before the first, between, after the last) ${outside.toFixed(2)} s`,
  );
  out(
    `rollout ÷ (5 × one replacement), fake delay subtracted = ${ratio.toFixed(2)} (target ≤ ${UPGRADE_TARGET}: ${ratio <= UPGRADE_TARGET ? 'met' : 'NOT met'})`,
  );
}
