/**
 * Day two through the built CLI, as a user runs it:
 *  - `verify --all` on 1 + 9 nodes against `verify -e` of one node (median of 5 runs each). Target: ≤ 2x.
 *  - every control-plane node of a 1 + 2 cluster rebooted (`mini reboot --control-planes`), `recover`, until every
 *    node has joined, against the same nodes' first boot (`mini up` 1 + 2, until every node has joined). Target: ≤ 1.5x.
 * Each cluster runs in a fresh temporary workspace, terminated and removed afterwards.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { getNodeStatus } from '../cli/cluster/status.js';
import { median } from './support/stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const TARGET_VERIFY_RATIO = 2;
const TARGET_RECOVER_RATIO = 1.5;

function cli(args: string[], ws: string): { seconds: number; stdout: string } {
  const start = process.hrtime.bigint();
  const res = spawnSync(process.execPath, [CLI, ...args, '-C', ws], { stdio: ['ignore', 'pipe', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (res.status !== 0)
    throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
  return { seconds, stdout: res.stdout.toString() };
}

async function withCluster(workers: number, run: (ws: string, upSeconds: number) => Promise<void>): Promise<void> {
  const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-day2-'));
  try {
    const up = cli(['mini', 'up', '-w', String(workers)], ws);
    await run(ws, up.seconds);
  } finally {
    spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
    rmSync(ws, { recursive: true, force: true });
  }
}

/** Polls every node's GetStatus until each says initialized or joined. */
async function untilAllJoined(addresses: string[]): Promise<void> {
  for (;;) {
    const states = await Promise.all(
      addresses.map((a) =>
        getNodeStatus(`${a}:30081`, 1000).then(
          (s) => s.state,
          () => 'unreachable',
        ),
      ),
    );
    if (states.every((s) => s === 'joined' || s === 'initialized')) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export default async function verifyRecoverBench(out: (line: string) => void): Promise<void> {
  await withCluster(9, async (ws) => {
    const nodes = (JSON.parse(cli(['status', '--json'], ws).stdout) as { nodes: { address: string }[] }).nodes;
    const one: number[] = [];
    const all: number[] = [];
    for (let i = 0; i < 5; i++) {
      one.push(cli(['verify', '-e', nodes[nodes.length - 1].address], ws).seconds);
      all.push(cli(['verify', '--all'], ws).seconds);
    }
    const ratio = median(all) / median(one);
    out(
      `verify --all on 1+9 nodes: ${median(all).toFixed(3)} s; verify of one node: ${median(one).toFixed(3)} s; ` +
        `ratio ${ratio.toFixed(2)}x (target ≤ ${TARGET_VERIFY_RATIO}x: ${ratio <= TARGET_VERIFY_RATIO ? 'met' : 'NOT met'})`,
    );
  });

  await withCluster(2, async (ws, firstBoot) => {
    const addresses = (JSON.parse(cli(['status', '--json'], ws).stdout) as { nodes: { address: string }[] }).nodes.map(
      (n) => n.address,
    );
    const start = process.hrtime.bigint();
    const reboot = cli(['mini', 'reboot', '--control-planes'], ws);
    const recover = cli(['recover'], ws);
    await untilAllJoined(addresses);
    const total = Number(process.hrtime.bigint() - start) / 1e9;
    const ratio = total / firstBoot;
    out(
      `reboot every control plane of 1+2 → recover → all joined: ${total.toFixed(2)} s (reboot ${reboot.seconds.toFixed(2)} s, recover ${recover.seconds.toFixed(2)} s); ` +
        `first boot (mini up 1+2): ${firstBoot.toFixed(2)} s; ratio ${ratio.toFixed(2)}x (target ≤ ${TARGET_RECOVER_RATIO}x: ${ratio <= TARGET_RECOVER_RATIO ? 'met' : 'NOT met'})`,
    );
  });
}
