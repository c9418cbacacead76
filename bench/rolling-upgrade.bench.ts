/**
 * Rolling upgrade of a local 3 + 2 cluster (issue 11), through a private copy of the built CLI whose dist/ is the node
 * image: v2 is that image with one byte changed, its measurements written into the config; `upgrade apply -y` replaces
 * all five nodes. Reported: the rollout's wall time against 5 × one node's replacement (the median of the rollout's
 * own replacements: add, join, verify, remove), target ≤ 1.2; and the probes that failed (the load balancer asked
 * every 100 ms for a status and an attestation document), target 0.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { editConfig } from '../cli/cluster/config-edit.js';
import { getNodeStatus } from '../cli/cluster/status.js';
import { readState } from '../lib/workspace/state.js';
import { LocalInfrastructure } from '../providers/local/infrastructure.js';
import { cleanUp, copyBuiltCli, start, run, tempDir } from '../test/e2e/support.js';
import { median } from './support/stats.js';

const TARGET_RATIO = 1.2;

export default async function rollingUpgradeBench(out: (line: string) => void): Promise<void> {
  const tmp = await tempDir('cl-bench-upgrade-');
  const copy = await copyBuiltCli(tmp);
  const ws = path.join(tmp, 'ws');
  await fs.mkdir(ws);
  try {
    const up = await run(copy, ws, ['mini', 'up', '-c', '3', '-w', '2']);
    if (up.code !== 0) throw new Error(`mini up failed: ${up.stderr}`);
    const file = path.join(copy.imageDir, 'bootstrapper', 'node-status.d.ts');
    await fs.appendFile(file, '// v2\n');
    const infra = new LocalInfrastructure({ nodeProgram: { entry: path.join(copy.imageDir, 'bootstrapper', 'main.js'), imageDir: copy.imageDir } });
    await editConfig(ws, { measurements: await infra.expectedMeasurements() });
    const lb = (await readState(ws)).infrastructure.clusterEndpoint;

    let probing = true;
    let probes = 0;
    let failed = 0;
    const probe = (async () => {
      while (probing) {
        probes++;
        await getNodeStatus(`${lb}:30081`, 2000).catch(() => failed++);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    // Timestamps of the rollout's own lines: "adding a node ... to replace X" → "replaced X with Y".
    const started = Date.now();
    const child = start(copy, ws, ['upgrade', 'apply', '-y'], true);
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
    probing = false;
    await probe;
    if (code !== 0) throw new Error(`upgrade apply failed:\n${output}`);
    const durations = [...steps.values()].filter((s) => s.to !== undefined).map((s) => (s.to! - s.from) / 1000);
    const one = median(durations);
    const ratio = total / (5 * one);
    out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)}`);
    out(`rolling upgrade of 3 + 2 nodes: ${total.toFixed(2)} s; one node's replacement (median of ${durations.length}): ${one.toFixed(2)} s`);
    out(`ratio: rollout / (5 × one replacement) = ${ratio.toFixed(2)} (target ≤ ${TARGET_RATIO}: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`);
    out(`probes through the load balancer during the rollout: ${probes}, failed ${failed} (target 0: ${failed === 0 ? 'met' : 'NOT met'})`);
  } finally {
    await cleanUp(copy, ws);
    await fs.rm(tmp, { recursive: true, force: true });
  }
}
