/**
 * Wall time of `constellation mini up` and `constellation terminate -y` through the built CLI, as a user runs them,
 * with the bundled node program (dist/node-program/, which every local node runs since issue 18).
 * Targets (issue 18): 1+2 ≤ 3 s and 1+9 ≤ 6 s on this machine (3.5 s and 6.8 s before the bundle); 3+2 < 10 s
 * (issue 10). Each size runs in a fresh temporary workspace, which is terminated and removed afterwards.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const SIZES: { controlPlanes: number; workers: number; targetS: number; target: string }[] = [
  { controlPlanes: 1, workers: 2, targetS: 3, target: '≤ 3 s' },
  { controlPlanes: 3, workers: 2, targetS: 10, target: '< 10 s' },
  { controlPlanes: 1, workers: 9, targetS: 6, target: '≤ 6 s' },
];

function timed(args: string[], ws: string): number {
  const start = process.hrtime.bigint();
  const res = spawnSync(process.execPath, [CLI, ...args, '-C', ws], { stdio: ['ignore', 'ignore', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (res.status !== 0) throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
  return seconds;
}

export default async function miniUpBench(out: (line: string) => void): Promise<void> {
  out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)} before the runs`);
  for (const size of SIZES) {
    const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-mini-'));
    try {
      const up = timed(['mini', 'up', '-c', String(size.controlPlanes), '-w', String(size.workers)], ws);
      const down = timed(['terminate', '-y'], ws);
      const met = up <= size.targetS ? 'met' : 'NOT met';
      out(`mini up ${size.controlPlanes}+${size.workers}: ${up.toFixed(2)} s (${(up / size.targetS).toFixed(2)}x of the target ${size.target}: ${met}); terminate: ${down.toFixed(2)} s`);
    } finally {
      spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
      rmSync(ws, { recursive: true, force: true });
    }
  }
}
