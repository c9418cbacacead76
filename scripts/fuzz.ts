/**
 * `npm run fuzz [-- --seconds N] [names...]`: runs every fuzz target of test/fuzz/targets.ts (or those whose
 * names contain one of `names`) for its share of N seconds (default 120, or FUZZ_SECONDS), one after another,
 * each in its own worker thread with a 512 MiB heap limit and a watchdog: a worker that runs out of memory or
 * does not report within its time plus 30 s is a finding too (unbounded memory, a hang). Prints the inputs
 * tried per parser and every finding with its input and the seed that replays it (FUZZ_SEED=<seed>), and
 * exits 1 when there was one. fast-check generates and shrinks the inputs; coverage-guided fuzzing (Jazzer.js)
 * is not used: see docs/fuzzing.md.
 */
import { Worker } from 'node:worker_threads';
import type { TargetRun } from '../test/fuzz/run-target.js';

const args = process.argv.slice(2);
const secondsFlag = args.indexOf('--seconds');
const totalSeconds = Number(secondsFlag >= 0 ? args[secondsFlag + 1] : (process.env.FUZZ_SECONDS ?? 120));
const filters = args.filter((a, i) => a !== '--seconds' && i !== secondsFlag + 1);
const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const WORKER = new URL('../test/fuzz/worker.ts', import.meta.url).href;
/** A worker's entry cannot be TypeScript on Node 20 (the --import hook reaches it too late): register tsx, then load it. */
const BOOT = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(WORKER)}); })`;
const WATCHDOG_SLACK_MS = 30_000;

type WorkerReply = { type: 'names'; names: string[] } | { type: 'run'; run: TargetRun };

function inWorker<T extends WorkerReply>(data: Record<string, unknown>, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(BOOT, { eval: true, workerData: data, resourceLimits: { maxOldGenerationSizeMb: 512 } });
    const watchdog = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`no answer within ${Math.round(timeoutMs / 1000)} s: a hang`));
    }, timeoutMs);
    worker.once('message', (reply: T) => {
      clearTimeout(watchdog);
      // The worker has closed its sockets; let it end on its own, and end it only if it does not within 5 s.
      const stop = setTimeout(() => void worker.terminate(), 5_000);
      worker.once('exit', () => clearTimeout(stop));
      resolve(reply);
    });
    worker.once('error', (err) => {
      clearTimeout(watchdog);
      reject(err);
    });
  });
}

const { names } = await inWorker<Extract<WorkerReply, { type: 'names' }>>({ list: true }, 120_000);
const chosen = names.filter((n) => filters.length === 0 || filters.some((f) => n.includes(f)));
const perTargetMs = Math.max(1000, Math.floor((totalSeconds * 1000) / chosen.length));
console.log(
  `fuzzing ${chosen.length} parsers, ${(perTargetMs / 1000).toFixed(1)} s each${seed === undefined ? '' : `, seed ${seed}`}`,
);
console.log(`${'parser'.padEnd(22)} ${'inputs'.padStart(10)} ${'inputs/s'.padStart(9)}  result`);
let findings = 0;
let total = 0;
for (const name of chosen) {
  let line: string;
  try {
    const { run } = await inWorker<Extract<WorkerReply, { type: 'run' }>>(
      { name, timeMs: perTargetMs, seed },
      perTargetMs + WATCHDOG_SLACK_MS + 60_000,
    );
    total += run.iterations;
    const rate = (run.iterations / (run.ms / 1000)).toFixed(0);
    line = `${name.padEnd(22)} ${String(run.iterations).padStart(10)} ${rate.padStart(9)}  `;
    if (run.finding) {
      findings++;
      line += `FINDING: ${run.finding.error}\n${' '.repeat(24)}input: ${run.finding.input}\n${' '.repeat(24)}replay: FUZZ_SEED=${run.finding.seed} npm run fuzz -- ${name}`;
    } else {
      line += 'nothing found';
    }
  } catch (err) {
    findings++;
    line = `${name.padEnd(22)} ${'?'.padStart(10)} ${'?'.padStart(9)}  FINDING: ${(err as Error).message}`;
  }
  console.log(line);
}
console.log(`${total} inputs in total; ${findings === 0 ? 'nothing found' : `${findings} finding(s)`}`);
process.exit(findings === 0 ? 0 : 1);
