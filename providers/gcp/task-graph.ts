/**
 * A dependency-ordered, concurrent task runner: every task starts as soon as all tasks it depends on have
 * finished, so independent cloud calls overlap and the dependency order stays explicit in code.
 * Two failure modes: `stopOnError` (create) starts nothing new after the first failure, lets running tasks
 * finish (so whatever they made gets recorded) and throws that failure; otherwise (terminate) every task whose
 * dependencies succeeded still runs, tasks depending on a failed one are skipped, and all failures are thrown.
 * Also the longest weighted chain of a graph (the bench's critical path).
 * Hand-written: no library in the dependency set runs graphs (listr2 runs lists). Generic; the other cloud
 * providers have their own copies, which could move to lib/.
 */

export interface Task {
  id: string;
  /** ids of tasks that must finish first; unknown ids are a programming error. */
  deps: readonly string[];
  run: () => Promise<void>;
}

export class TaskFailedError extends Error {
  constructor(
    readonly taskId: string,
    override readonly cause: unknown,
  ) {
    super(`${taskId}: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'TaskFailedError';
  }
}

export class TaskGraphError extends Error {
  constructor(readonly failures: TaskFailedError[]) {
    super(failures.map((f) => f.message).join('; '));
    this.name = 'TaskGraphError';
  }
}

function checkGraph(tasks: readonly { id: string; deps: readonly string[] }[]): void {
  const ids = new Set(tasks.map((t) => t.id));
  if (ids.size !== tasks.length) throw new Error('task graph: duplicate task ids');
  for (const t of tasks) {
    for (const d of t.deps) if (!ids.has(d)) throw new Error(`task graph: ${t.id} depends on unknown task ${d}`);
  }
  longestChain(tasks, () => 0); // throws on a cycle
}

export async function runTaskGraph(
  tasks: readonly Task[],
  options: { stopOnError: boolean; signal?: AbortSignal },
): Promise<void> {
  checkGraph(tasks);
  const state = new Map<string, 'waiting' | 'running' | 'done' | 'failed' | 'skipped'>(tasks.map((t) => [t.id, 'waiting']));
  const failures: TaskFailedError[] = [];
  let running = 0;

  await new Promise<void>((resolve) => {
    const schedule = () => {
      const stopping = (options.stopOnError && failures.length > 0) || options.signal?.aborted === true;
      for (const task of tasks) {
        if (state.get(task.id) !== 'waiting') continue;
        const depStates = task.deps.map((d) => state.get(d));
        if (depStates.some((s) => s === 'failed' || s === 'skipped')) {
          state.set(task.id, 'skipped');
          continue;
        }
        if (stopping || !depStates.every((s) => s === 'done')) continue;
        state.set(task.id, 'running');
        running++;
        task.run().then(
          () => state.set(task.id, 'done'),
          (err: unknown) => {
            state.set(task.id, 'failed');
            failures.push(new TaskFailedError(task.id, err));
          },
        ).finally(() => {
          running--;
          schedule();
        });
      }
      if (running === 0) resolve();
    };
    schedule();
  });

  if (options.stopOnError && failures.length > 0) throw failures[0]!;
  if (failures.length > 0) throw new TaskGraphError(failures);
  options.signal?.throwIfAborted();
}

/** The heaviest chain of dependent tasks: its total weight and its task ids, first to last. */
export function longestChain(
  tasks: readonly { id: string; deps: readonly string[] }[],
  weight: (id: string) => number,
): { total: number; chain: string[] } {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const best = new Map<string, { total: number; chain: string[] }>();
  const visiting = new Set<string>();
  const visit = (id: string): { total: number; chain: string[] } => {
    const known = best.get(id);
    if (known) return known;
    if (visiting.has(id)) throw new Error(`task graph: cycle through ${id}`);
    visiting.add(id);
    let heaviest = { total: 0, chain: [] as string[] };
    for (const dep of byId.get(id)?.deps ?? []) {
      const candidate = visit(dep);
      if (candidate.total > heaviest.total || heaviest.chain.length === 0) heaviest = candidate;
    }
    visiting.delete(id);
    const result = { total: heaviest.total + weight(id), chain: [...heaviest.chain, id] };
    best.set(id, result);
    return result;
  };
  let overall = { total: 0, chain: [] as string[] };
  for (const t of tasks) {
    const candidate = visit(t.id);
    if (candidate.total > overall.total || overall.chain.length === 0) overall = candidate;
  }
  return overall;
}
