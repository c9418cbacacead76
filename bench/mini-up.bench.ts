/**
 * Wall time and CPU time of `constellation mini up` and `constellation terminate -y` through the built CLI, as a
 * user runs them, with the bundled node program (dist/node-program/, which every local node runs since issue 18).
 * CPU time is that of the CLI and every process it starts (swtpm, launchers, node programs, etcd, the cloud
 * daemon), counted in a cgroup (./support/cpu-time.ts): on a machine shared with other work it says what the run
 * costs where the wall time only says how long it waited. Targets (issue 18): 1+2 ≤ 3 s and 1+9 ≤ 6 s on this
 * machine (3.5 s and 6.8 s before the bundle); 3+2 < 10 s (issue 10); read literally from the wall time.
 * Each size runs in a fresh temporary workspace, which is terminated and removed afterwards.
 * BENCH_MINI_SIZES=1+2,1+9 picks sizes; BENCH_MINI_RUNS=N repeats each (the fastest and the median are printed).
 * The CLI's own Node.js start is part of each number.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAverage, openCpuGroup, type CpuGroup } from './support/cpu-time.js';
import { median } from './support/stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** BENCH_CLI=<checkout>/bin/constellation measures another build (e.g. the one before a change, alternating runs). */
const CLI = process.env.BENCH_CLI ? path.resolve(process.env.BENCH_CLI) : path.join(ROOT, 'bin/constellation');
const SIZES: { controlPlanes: number; workers: number; targetS: number; target: string }[] = [
  { controlPlanes: 1, workers: 2, targetS: 3, target: '≤ 3 s' },
  { controlPlanes: 3, workers: 2, targetS: 10, target: '< 10 s' },
  { controlPlanes: 1, workers: 9, targetS: 6, target: '≤ 6 s' },
];

function timed(args: string[], ws: string, group?: CpuGroup): number {
  const start = process.hrtime.bigint();
  const command = [process.execPath, CLI, ...args, '-C', ws];
  const { file, args: argv } = group
    ? group.wrap(command[0]!, command.slice(1))
    : { file: command[0]!, args: command.slice(1) };
  const res = spawnSync(file, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (res.status !== 0)
    throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
  return seconds;
}

/** One mini up + terminate in a fresh workspace: wall seconds of each and CPU seconds of each (NaN: not measured). */
async function runOnce(
  controlPlanes: number,
  workers: number,
): Promise<{ up: number; upCpu: number; down: number; downCpu: number }> {
  const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-mini-'));
  const group = await openCpuGroup('mini-up');
  try {
    const up = timed(['mini', 'up', '-c', String(controlPlanes), '-w', String(workers)], ws, group);
    const upCpu = group ? await group.seconds() : NaN;
    const down = timed(['terminate', '-y'], ws, group);
    const downCpu = group ? (await group.seconds()) - upCpu : NaN;
    return { up, upCpu, down, downCpu };
  } finally {
    spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
    rmSync(ws, { recursive: true, force: true });
    await group?.close();
  }
}

const cpu = (s: number) => (Number.isNaN(s) ? 'CPU not measured' : `CPU ${s.toFixed(2)} s`);

export default async function miniUpBench(out: (line: string) => void): Promise<void> {
  const wanted = process.env.BENCH_MINI_SIZES?.split(',').map((s) => s.trim());
  const runs = Math.max(1, Number(process.env.BENCH_MINI_RUNS ?? 1));
  const probe = await openCpuGroup('probe');
  await probe?.close();
  out(
    `machine: ${os.availableParallelism()} CPUs, load average ${loadAverage()} before the runs; CPU time: ${probe?.source ?? 'no writable cgroup (not measured)'}`,
  );
  for (const size of SIZES.filter((s) => !wanted || wanted.includes(`${s.controlPlanes}+${s.workers}`))) {
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push(await runOnce(size.controlPlanes, size.workers));
    const up = runs === 1 ? samples[0]!.up : median(samples.map((s) => s.up));
    const met = up <= size.targetS ? 'met' : 'NOT met';
    const spread =
      runs === 1 ? '' : ` (median of ${runs}; fastest ${Math.min(...samples.map((s) => s.up)).toFixed(2)} s)`;
    out(
      `mini up ${size.controlPlanes}+${size.workers}: ${up.toFixed(2)} s${spread}, ${cpu(median(samples.map((s) => s.upCpu)))} ` +
        `(${(up / size.targetS).toFixed(2)}x of the target ${size.target}: ${met}); ` +
        `terminate: ${median(samples.map((s) => s.down)).toFixed(2)} s, ${cpu(median(samples.map((s) => s.downCpu)))}; load ${loadAverage()}`,
    );
  }
}
