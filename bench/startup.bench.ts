/**
 * Start-up time of the CLI as a user feels it: whole-process wall time of `constellation --help` and
 * `constellation version`, next to `node -e 0` measured in the same run (the floor no CLI can beat).
 * Target: each ratio <= 3, i.e. no cloud SDK and nothing heavy loaded on the way to the command.
 * Runs are interleaved (node, help, version, node, ...) so a busy machine slows all three alike. The ratio uses
 * the fastest run of each (the one least disturbed by other load on a shared machine); medians are shown too.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const RUNS = 15;
const TARGET_RATIO = 3;

const cases: { name: string; args: string[] }[] = [
  { name: 'node -e 0', args: ['-e', '0'] },
  { name: 'constellation --help', args: [CLI, '--help'] },
  { name: 'constellation version', args: [CLI, 'version'] },
];

function wallMs(args: string[]): number {
  const start = process.hrtime.bigint();
  const res = spawnSync(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (res.status !== 0) throw new Error(`${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
  return ms;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export default async function startup(out: (line: string) => void): Promise<void> {
  for (const c of cases) wallMs(c.args); // warm the file cache
  const samples = cases.map(() => [] as number[]);
  for (let i = 0; i < RUNS; i++) cases.forEach((c, j) => samples[j]!.push(wallMs(c.args)));
  const best = samples.map((s) => Math.min(...s));
  const medians = samples.map(median);
  const ms = (v: number) => `${v.toFixed(1).padStart(6)} ms`;
  out(`${RUNS} runs each, wall time of the whole process: fastest (median)`);
  out(`${cases[0]!.name.padEnd(22)} ${ms(best[0]!)} (${ms(medians[0]!)})  baseline`);
  for (let j = 1; j < cases.length; j++) {
    const ratio = best[j]! / best[0]!;
    const verdict = ratio <= TARGET_RATIO ? 'meets' : 'MISSES';
    out(
      `${cases[j]!.name.padEnd(22)} ${ms(best[j]!)} (${ms(medians[j]!)})  ratio ${ratio.toFixed(2)} to node -e 0` +
        ` (median ratio ${(medians[j]! / medians[0]!).toFixed(2)}; target <= ${TARGET_RATIO}: ${verdict})`,
    );
  }
}
