/**
 * Wall time of `constellation mini up` and `constellation terminate -y` through the built CLI, as a user runs them,
 * for 1 control plane + 2 workers and 1 + 9. Target: 1+2 up in under 10 s (the ratio printed is time / 10 s).
 * Each size runs in a fresh temporary workspace, which is terminated and removed afterwards.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const TARGET_UP_1_2_S = 10;

function timed(args: string[], ws: string): number {
  const start = process.hrtime.bigint();
  const res = spawnSync(process.execPath, [CLI, ...args, '-C', ws], { stdio: ['ignore', 'ignore', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (res.status !== 0) throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
  return seconds;
}

export default async function miniUpBench(out: (line: string) => void): Promise<void> {
  for (const workers of [2, 9]) {
    const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-mini-'));
    try {
      const up = timed(['mini', 'up', '-w', String(workers)], ws);
      const down = timed(['terminate', '-y'], ws);
      const ratio = workers === 2 ? ` (${(up / TARGET_UP_1_2_S).toFixed(2)}x of the ${TARGET_UP_1_2_S} s target)` : '';
      out(`mini up 1+${workers}: ${up.toFixed(2)} s${ratio}; terminate: ${down.toFixed(2)} s; together ${(up + down).toFixed(2)} s`);
    } finally {
      spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
      rmSync(ws, { recursive: true, force: true });
    }
  }
}
