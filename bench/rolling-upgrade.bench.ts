/**
 * Rolling upgrade of a local 3 + 2 cluster (issue 11) from image v1 to v2, through a private copy of the built CLI
 * and a temporary user config folder: v1 is the copy's build, v2 that build with one line more (`mini image create`
 * each); after `mini up --image v1`, the config names v2 with its signed measurements (`config fetch-measurements`)
 * and `upgrade apply -y` replaces all five nodes. Reported: the rollout's wall time against 5 × one node's
 * replacement (the median of the rollout's own replacements: add, join, verify, remove), target ≤ 1.2; and the
 * probes that failed (the load balancer asked every 100 ms for the join service's health, a node's status and an
 * attestation document: the e2e test's probe), target 0.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { editConfig } from '../lib/config/edit.js';
import { readState } from '../lib/workspace/state.js';
import {
  changedBuild,
  cleanUp,
  copyBuiltCli,
  start,
  run,
  startLoadBalancerProbe,
  tempDir,
} from '../test/e2e/support.js';
import { median } from './support/stats.js';

const TARGET_RATIO = 1.2;

export default async function rollingUpgradeBench(out: (line: string) => void): Promise<void> {
  const tmp = await tempDir('cl-bench-upgrade-');
  const copy = await copyBuiltCli(tmp);
  const ws = path.join(tmp, 'ws');
  await fs.mkdir(ws);
  const env = { XDG_CONFIG_HOME: path.join(tmp, 'config') };
  const ok = async (args: string[]) => {
    const res = await run(copy, ws, args, env);
    if (res.code !== 0) throw new Error(`${args.join(' ')} failed: ${res.stderr}`);
  };
  try {
    await ok(['mini', 'image', 'create', 'v1', '--from', copy.root]);
    await ok(['mini', 'image', 'create', 'v2', '--from', await changedBuild(copy, path.join(tmp, 'build-v2'), 'v2')]);
    await ok(['mini', 'up', '--image', 'v1', '-c', '3', '-w', '2']);
    await editConfig(ws, { image: 'v2' });
    await ok(['config', 'fetch-measurements']);
    const lb = (await readState(ws)).infrastructure.clusterEndpoint;

    const probe = startLoadBalancerProbe(lb);

    // Timestamps of the rollout's own lines: "adding a node ... to replace X" → "replaced X with Y".
    const started = Date.now();
    const child = start(copy, ws, ['upgrade', 'apply', '-y'], true, env);
    const steps = new Map<string, { from: number; to?: number }>();
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of chunk.toString().split('\n')) {
        const adding = /to replace (\S+)$/.exec(line);
        if (adding) steps.set(adding[1], { from: Date.now() });
        const replaced = /^replaced (\S+) with/.exec(line);
        if (replaced && steps.has(replaced[1])) steps.get(replaced[1])!.to = Date.now();
      }
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const total = (Date.now() - started) / 1000;
    const { calls: probes, failures } = await probe.stop();
    const failed = failures.length;
    if (code !== 0) throw new Error(`upgrade apply failed:\n${output}`);
    const durations = [...steps.values()].filter((s) => s.to !== undefined).map((s) => (s.to! - s.from) / 1000);
    const one = median(durations);
    const ratio = total / (5 * one);
    out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)}`);
    out(
      `rolling upgrade of 3 + 2 nodes: ${total.toFixed(2)} s; one node's replacement (median of ${durations.length}): ${one.toFixed(2)} s`,
    );
    out(
      `ratio: rollout / (5 × one replacement) = ${ratio.toFixed(2)} (target ≤ ${TARGET_RATIO}: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`,
    );
    out(
      `probes through the load balancer during the rollout: ${probes}, failed ${failed} (target 0: ${failed === 0 ? 'met' : 'NOT met'})`,
    );
  } finally {
    await cleanUp(copy, ws);
    await fs.rm(tmp, { recursive: true, force: true });
  }
}
