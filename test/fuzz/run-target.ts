/**
 * Runs one fuzz target for a time budget with fast-check: each input must return, or throw an error the target
 * expects, within SLOW_INPUT_MS. Returns the number of inputs tried and, for a finding, fast-check's shrunk
 * counterexample with the error it caused.
 */
import fc from 'fast-check';
import { SLOW_INPUT_MS, type FuzzTarget } from './targets.js';

export interface TargetRun {
  name: string;
  iterations: number;
  ms: number;
  /** A finding: what the smallest failing input threw, and the input (shortened for printing). */
  finding?: { error: string; input: string; seed: number; path?: string };
}

/** Why an input failed: an unexpected error, or too slow. */
class Finding extends Error {}

export async function runTarget(
  target: FuzzTarget,
  options: { timeMs: number; seed?: number; maxRuns?: number },
): Promise<TargetRun> {
  const started = performance.now();
  let iterations = 0;
  const property = fc.asyncProperty(target.inputs, async (input) => {
    iterations++;
    const t = performance.now();
    try {
      await target.run(input);
    } catch (err) {
      if (!target.expected(err)) {
        throw new Finding(
          `threw ${(err as Error)?.constructor?.name ?? typeof err}: ${(err as Error)?.message ?? String(err)}`,
        );
      }
    }
    const ms = performance.now() - t;
    if (ms > SLOW_INPUT_MS) throw new Finding(`took ${ms.toFixed(0)} ms for one input of ${sizeOf(input)} bytes`);
  });
  const details = await fc.check(property, {
    numRuns: options.maxRuns ?? Number.MAX_SAFE_INTEGER,
    interruptAfterTimeLimit: options.timeMs,
    markInterruptAsFailure: false,
    seed: options.seed,
    endOnFailure: false,
  });
  const run: TargetRun = { name: target.name, iterations, ms: performance.now() - started };
  if (details.failed) {
    const error =
      details.errorInstance instanceof Finding ? details.errorInstance.message : String(details.errorInstance);
    run.finding = {
      error,
      input: describeInput(details.counterexample?.[0]),
      seed: details.seed,
      path: details.counterexamplePath ?? undefined,
    };
  }
  return run;
}

function sizeOf(input: unknown): number {
  if (input instanceof Uint8Array) return input.length;
  if (typeof input === 'string') return Buffer.byteLength(input);
  if (Array.isArray(input)) return input.reduce((n: number, x) => n + sizeOf(x), 0);
  if (typeof input === 'object' && input !== null)
    return Object.values(input).reduce((n: number, x) => n + sizeOf(x), 0);
  return 0;
}

function describeInput(input: unknown): string {
  const text =
    JSON.stringify(input, (_k, v) => (v instanceof Uint8Array ? `hex:${Buffer.from(v).toString('hex')}` : v)) ??
    String(input);
  return text.length > 600 ? `${text.slice(0, 600)}… (${text.length} characters)` : text;
}
