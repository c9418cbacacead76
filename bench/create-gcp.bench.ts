/**
 * `create` and `terminate` on GCP against the fake Compute API with a fixed latency per API call and per
 * operation. Prints the wall time next to the critical path: the longest chain of dependent steps of the graph,
 * each step weighted with the same latencies (insert or delete call, then `wait` until the operation is done:
 * CALL + max(CALL, OPERATION); plus one CALL for a step that reads its resource back). Target: wall time <=
 * 1.3 x critical path. A first, unmeasured run loads the SDK and makes its clients.
 */
import { performance } from 'node:perf_hooks';
import { MemoryResourceJournal } from '../lib/workspace/resource-journal.js';
import { GcpInfrastructure } from '../providers/gcp/infrastructure.js';
import { buildPlan } from '../providers/gcp/plan.js';
import { criticalPath } from '../providers/common/task-graph.js';
import { FakeGcp } from '../test/fakes/gcp/server.js';
import { createRequest, providerContext } from '../test/providers/gcp/support.js';

const CALL_MS = 50;
const OPERATION_MS = 500;
const TARGET = 1.3;

export default async function (out: (line: string) => void): Promise<void> {
  const fake = await FakeGcp.start();
  try {
    const infra = new GcpInfrastructure(fake.providerOptions());
    const warmUp = providerContext();
    await infra.create(createRequest(), warmUp);
    await infra.terminate(warmUp);

    fake.reset({ latencyMs: CALL_MS, operationMs: OPERATION_MS });
    const steps = buildPlan(createRequest()).steps;
    const stepCost = CALL_MS + Math.max(CALL_MS, OPERATION_MS);
    const graph = steps.map((s) => ({ id: s.key, deps: s.deps }));
    const createPath = criticalPath(
      graph,
      (id) => stepCost + (steps.find((s) => s.key === id)!.readBack ? CALL_MS : 0),
    );
    // Deleting runs the graph backwards: a resource goes after everything that depends on it.
    const reversed = steps.map((s) => ({
      id: s.key,
      deps: steps.filter((o) => o.deps.includes(s.key)).map((o) => o.key),
    }));
    const terminatePath = criticalPath(reversed, () => stepCost);

    const ctx = providerContext(new MemoryResourceJournal());
    let start = performance.now();
    await infra.create(createRequest(), ctx);
    const createMs = performance.now() - start;
    start = performance.now();
    await infra.terminate(ctx);
    const terminateMs = performance.now() - start;
    if (fake.compute.list().length !== 0) throw new Error('terminate left resources in the fake');

    const line = (what: string, wall: number, path: { length: number; path: string[] }) =>
      `${what} (${steps.length} resources, ${CALL_MS} ms/call, ${OPERATION_MS} ms/operation): wall ${Math.round(wall)} ms, ` +
      `critical path ${path.length} ms (${path.path.join(' > ')}), ratio ${(wall / path.length).toFixed(2)} (target <= ${TARGET})`;
    out(line('create', createMs, createPath));
    out(line('terminate', terminateMs, terminatePath));
  } finally {
    await fake.close();
  }
}
