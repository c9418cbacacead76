/**
 * A small dependency-ordered task runner: every task starts as soon as all tasks it depends on have finished,
 * so independent cloud resources are created (or deleted) concurrently while the order stays explicit in code.
 * On the first failure no further task starts; tasks already running are awaited (so everything the cloud
 * accepted is recorded) before the first error is thrown. Also computes the critical path of a graph, which the
 * benchmark compares the wall time against.
 *
 * Written here because no maintained library in the dependency set does this; it is generic (no Azure in it)
 * and may be merged with the other clouds' copies.
 */

export interface GraphTask<T = unknown> {
  id: string;
  dependsOn: readonly string[];
  /** Receives the results of the tasks it depends on (and of every task finished before it). */
  run(results: ReadonlyMap<string, unknown>): Promise<T>;
}

export interface RunGraphOptions {
  signal?: AbortSignal;
}

/** Checks that every dependency exists and that there is no cycle; throws a programming error otherwise. */
export function assertAcyclic(tasks: readonly { id: string; dependsOn: readonly string[] }[]): void {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  if (byId.size !== tasks.length) throw new Error('task graph: duplicate task ids');
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (id: string, trail: string[]): void => {
    const task = byId.get(id);
    if (!task) throw new Error(`task graph: "${trail.at(-1)}" depends on unknown task "${id}"`);
    if (state.get(id) === 'done') return;
    if (state.get(id) === 'visiting') throw new Error(`task graph: cycle ${[...trail, id].join(' -> ')}`);
    state.set(id, 'visiting');
    for (const dep of task.dependsOn) visit(dep, [...trail, id]);
    state.set(id, 'done');
  };
  for (const t of tasks) visit(t.id, []);
}

/** Runs the tasks as early as their dependencies allow; resolves with every task's result by id. */
export async function runTaskGraph(tasks: readonly GraphTask[], options: RunGraphOptions = {}): Promise<Map<string, unknown>> {
  assertAcyclic(tasks);
  const results = new Map<string, unknown>();
  const started = new Set<string>();
  const running = new Set<Promise<void>>();
  let firstError: unknown;

  const startReady = (): void => {
    if (firstError !== undefined) return;
    if (options.signal?.aborted) {
      firstError = options.signal.reason ?? new Error('aborted');
      return;
    }
    for (const task of tasks) {
      if (started.has(task.id) || !task.dependsOn.every((d) => results.has(d))) continue;
      started.add(task.id);
      const p: Promise<void> = task
        .run(results)
        .then(
          (value) => {
            results.set(task.id, value);
          },
          (err: unknown) => {
            if (firstError === undefined) firstError = err;
          },
        )
        .finally(() => {
          running.delete(p);
          startReady();
        });
      running.add(p);
    }
  };

  startReady();
  while (running.size > 0) await Promise.race(running);
  if (firstError !== undefined) throw firstError;
  return results;
}

/** The longest chain of dependent tasks, by the given cost of each task. */
export function criticalPath(
  tasks: readonly { id: string; dependsOn: readonly string[] }[],
  cost: (id: string) => number,
): { length: number; path: string[] } {
  assertAcyclic(tasks);
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const memo = new Map<string, { length: number; path: string[] }>();
  const longestTo = (id: string): { length: number; path: string[] } => {
    const known = memo.get(id);
    if (known) return known;
    let best = { length: 0, path: [] as string[] };
    for (const dep of byId.get(id)!.dependsOn) {
      const candidate = longestTo(dep);
      if (candidate.length > best.length) best = candidate;
    }
    const result = { length: best.length + cost(id), path: [...best.path, id] };
    memo.set(id, result);
    return result;
  };
  let overall = { length: 0, path: [] as string[] };
  for (const t of tasks) {
    const candidate = longestTo(t.id);
    if (candidate.length > overall.length) overall = candidate;
  }
  return overall;
}
