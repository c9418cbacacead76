/**
 * `create` on AWS against the fake AWS with a fixed latency per API call and per long-running operation.
 * Prints the wall time next to the critical path: the longest chain of dependent steps of the create graph,
 * each step weighted with the same latencies (its API calls that do work × call latency, plus the operation
 * time if it waits for one). Target: wall time <= 1.3 × critical path.
 */
import { performance } from 'node:perf_hooks';
import { AwsInfrastructure } from '../providers/aws/infrastructure.js';
import type { AwsApiCall } from '../providers/aws/options.js';
import { MemoryResourceJournal } from '../lib/workspace/resource-journal.js';
import { startFakeAws } from '../test/fakes/aws/server.js';
import { context, createRequest, fakeOptions } from '../test/providers/aws/support.js';

const CALL_MS = 50;
const LRO_MS = 800;
const TARGET = 1.3;

interface Step {
  id: string;
  deps: string[];
}

/** Longest weighted path through the step graph; returns its length and the chain of step ids. */
function criticalPath(steps: Step[], weight: (id: string) => number): { ms: number; chain: string[] } {
  const memo = new Map<string, { ms: number; chain: string[] }>();
  const byId = new Map(steps.map((s) => [s.id, s]));
  const longest = (id: string): { ms: number; chain: string[] } => {
    const known = memo.get(id);
    if (known) return known;
    const before = byId
      .get(id)!
      .deps.map(longest)
      .reduce((a, b) => (b.ms > a.ms ? b : a), { ms: 0, chain: [] as string[] });
    const result = { ms: before.ms + weight(id), chain: [...before.chain, id] };
    memo.set(id, result);
    return result;
  };
  return steps.map((s) => longest(s.id)).reduce((a, b) => (b.ms > a.ms ? b : a));
}

interface Run {
  wall: number;
  steps: Step[];
  calls: AwsApiCall[];
}

/** One create (and terminate) against a fresh fake, with fresh clients. */
async function createOnce(): Promise<Run> {
  const fake = await startFakeAws({ latencyMs: CALL_MS, lroMs: LRO_MS });
  const calls: AwsApiCall[] = [];
  let steps: Step[] = [];
  const infra = new AwsInfrastructure(
    fakeOptions(fake, {
      waiter: { minDelaySeconds: 0.01, maxDelaySeconds: 0.02, maxWaitSeconds: 60 },
      onApiCall: (c) => calls.push(c),
      onPlan: (s) => (steps = s),
    }),
  );
  const ctx = context(new MemoryResourceJournal());
  try {
    const start = performance.now();
    await infra.create(createRequest(), ctx);
    const wall = performance.now() - start;
    const createCalls = [...calls];
    await infra.terminate(ctx);
    return { wall, steps, calls: createCalls };
  } finally {
    await fake.close();
  }
}

export default async function bench(out: (line: string) => void): Promise<void> {
  // The first run in a process also pays for loading the SDK's lazily loaded parts and opening connections.
  const cold = await createOnce();
  const { wall, steps, calls } = await createOnce();

  const work = new Map<string, number>();
  const waits = new Set<string>();
  for (const c of calls) {
    if (!c.task) continue;
    if (c.waiting) waits.add(c.task);
    else work.set(c.task, (work.get(c.task) ?? 0) + 1);
  }
  const path = criticalPath(steps, (id) => (work.get(id) ?? 0) * CALL_MS + (waits.has(id) ? LRO_MS : 0));
  const ratio = wall / path.ms;
  out(
    `latency ${CALL_MS} ms per call, ${LRO_MS} ms per long-running operation; ${steps.length} steps, ${calls.length} API calls`,
  );
  out(`critical path ${path.ms.toFixed(0)} ms: ${path.chain.join(' -> ')}`);
  out(
    `create wall time ${wall.toFixed(0)} ms = ${ratio.toFixed(2)}x the critical path (target <= ${TARGET}x: ${ratio <= TARGET ? 'met' : 'NOT met'})`,
  );
  out(
    `first create in the process (SDK warm-up included): ${cold.wall.toFixed(0)} ms = ${(cold.wall / path.ms).toFixed(2)}x`,
  );
}
