/**
 * The dependency-ordered, concurrent task runner every cloud provider builds create, terminate and IAM on: a task
 * starts as soon as every task it depends on has finished, so independent cloud calls overlap while the order
 * stays explicit in code. When several tasks become ready at once, the one with the longest chain of dependents
 * starts first (each start costs CPU for serialising and signing a request, so the chain deciding the total time
 * is not kept waiting behind leaves). Two ways to react to a failure (`onFailure`): 'stop' (create; the default)
 * starts no further task, lets tasks already running finish (so whatever they made gets recorded) and throws the
 * first failure as a TaskGraphError; 'skip-dependents' (terminate, destroy) keeps starting every task whose
 * dependencies all succeeded, never starts one that depends on a failed task, and throws all failures. Also: the graph
 * check (unique ids, known dependencies, no cycle), the critical path the benchmarks compare wall time with, and
 * instrumentation (start/end hooks; currentTask() tells code which task it runs in, through AsyncLocalStorage).
 *
 * Hand-written: no library in the dependency set runs graphs (listr2 runs lists). Generic: no cloud in it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface Task<T = unknown> {
  id: string;
  /**
   * ids of tasks that must finish first; unknown ids are a programming error. `deps` and `dependsOn` are both
   * read (their union counts), so tasks built from plans and journal records, which say dependsOn, need no mapping.
   */
  deps?: readonly string[];
  dependsOn?: readonly string[];
  /** Receives the results of every task finished so far (so at least those of its dependencies). */
  run(results: ReadonlyMap<string, unknown>): Promise<T>;
}

/** The shape of a graph without the work: what the checks and the critical path need. */
export type TaskShape = Pick<Task, 'id' | 'deps' | 'dependsOn'>;

/** What is known about the task the current code runs in. */
export interface TaskContext {
  task: string;
  /** True while the task waits for a long-running operation (instrumentation does not count polls as work). */
  waiting: boolean;
}

export interface RunOptions {
  signal?: AbortSignal;
  /** What a failed task stops: every task not started yet ('stop', default) or only its dependents. */
  onFailure?: 'stop' | 'skip-dependents';
  /** Called when a task starts and ends (debug lines, instrumentation). */
  onTaskStart?: (task: Task) => void;
  onTaskEnd?: (task: Task, error?: unknown) => void;
}

export class TaskGraphError extends Error {
  constructor(
    /** id of the first task that failed, or "(aborted)" when the signal stopped the graph. */
    readonly task: string,
    override readonly cause: unknown,
    /** The other tasks that failed: ones running when the first failed, with 'skip-dependents' any later one. */
    readonly otherFailures: { task: string; error: unknown }[],
  ) {
    super(`task ${task} failed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'TaskGraphError';
  }

  /** Every failure, the first one first. */
  get failures(): { task: string; error: unknown }[] {
    return [{ task: this.task, error: this.cause }, ...this.otherFailures];
  }
}

const taskStorage = new AsyncLocalStorage<TaskContext>();

/** The task the calling code runs in, when it runs inside runTaskGraph. */
export function currentTask(): TaskContext | undefined {
  return taskStorage.getStore();
}

/** Runs `fn` marked as waiting for a long-running operation of the current task. */
export function whileWaiting<T>(fn: () => Promise<T>): Promise<T> {
  const current = taskStorage.getStore();
  return current ? taskStorage.run({ ...current, waiting: true }, fn) : fn();
}

export function dependenciesOf(task: TaskShape): string[] {
  return [...(task.deps ?? []), ...(task.dependsOn ?? [])];
}

/** Checks the graph (unique ids, known dependencies, no cycle) and returns the tasks in a topological order. */
export function topologicalOrder<T extends TaskShape>(tasks: readonly T[]): T[] {
  const byId = new Map<string, T>();
  for (const t of tasks) {
    if (byId.has(t.id)) throw new Error(`task graph: duplicate task id "${t.id}"`);
    byId.set(t.id, t);
  }
  const order: T[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (t: T, trail: string[]): void => {
    if (state.get(t.id) === 'done') return;
    if (state.get(t.id) === 'visiting')
      throw new Error(`task graph: dependency cycle: ${[...trail, t.id].join(' -> ')}`);
    state.set(t.id, 'visiting');
    for (const dep of dependenciesOf(t)) {
      const d = byId.get(dep);
      if (!d) throw new Error(`task graph: task "${t.id}" depends on unknown task "${dep}"`);
      visit(d, [...trail, t.id]);
    }
    state.set(t.id, 'done');
    order.push(t);
  };
  for (const t of tasks) visit(t, []);
  return order;
}

/** The longest chain of dependent tasks, by the given cost of each task (what no scheduling can beat). */
export function criticalPath(
  tasks: readonly TaskShape[],
  cost: (id: string) => number,
): { length: number; path: string[] } {
  const longestTo = new Map<string, { length: number; path: string[] }>();
  let overall = { length: 0, path: [] as string[] };
  for (const t of topologicalOrder(tasks)) {
    let best = { length: 0, path: [] as string[] };
    for (const dep of dependenciesOf(t)) {
      const candidate = longestTo.get(dep)!;
      if (candidate.length > best.length) best = candidate;
    }
    const chain = { length: best.length + cost(t.id), path: [...best.path, t.id] };
    longestTo.set(t.id, chain);
    if (chain.length > overall.length) overall = chain;
  }
  return overall;
}

/** For each task, how many tasks at most still wait for it one after another (itself included). */
function heights(order: readonly TaskShape[]): Map<string, number> {
  const dependents = new Map<string, string[]>();
  for (const t of order) for (const d of dependenciesOf(t)) dependents.set(d, [...(dependents.get(d) ?? []), t.id]);
  const height = new Map<string, number>();
  for (const t of [...order].reverse()) {
    height.set(t.id, 1 + Math.max(0, ...(dependents.get(t.id) ?? []).map((x) => height.get(x)!)));
  }
  return height;
}

/** Runs the tasks as early as their dependencies allow; resolves with every task's result by id. */
export async function runTaskGraph(tasks: readonly Task[], options: RunOptions = {}): Promise<Map<string, unknown>> {
  const height = heights(topologicalOrder(tasks));
  const byPriority = [...tasks].sort((a, b) => height.get(b.id)! - height.get(a.id)!);
  const results = new Map<string, unknown>();
  const started = new Set<string>();
  const running = new Map<string, Promise<void>>();
  const failures: { task: string; error: unknown }[] = [];

  // A failed task never gets a result, so its dependents (and theirs) never become ready.
  const ready = (t: Task) => !started.has(t.id) && dependenciesOf(t).every((d) => results.has(d));
  const keepGoing = options.onFailure === 'skip-dependents';

  const start = (t: Task) => {
    started.add(t.id);
    options.onTaskStart?.(t);
    const p = taskStorage
      .run({ task: t.id, waiting: false }, () => t.run(results))
      .then(
        (value) => {
          results.set(t.id, value);
          options.onTaskEnd?.(t);
        },
        (error: unknown) => {
          failures.push({ task: t.id, error });
          options.onTaskEnd?.(t, error);
        },
      )
      .finally(() => running.delete(t.id));
    running.set(t.id, p);
  };

  for (;;) {
    if ((failures.length === 0 || keepGoing) && !options.signal?.aborted) {
      for (const t of byPriority) if (ready(t)) start(t);
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  if (failures.length > 0) {
    const [first, ...others] = failures;
    throw new TaskGraphError(first.task, first.error, others);
  }
  if (results.size < tasks.length) {
    // Only an abort leaves tasks unstarted without a failure.
    throw new TaskGraphError('(aborted)', options.signal?.reason ?? new Error('aborted'), []);
  }
  return results;
}

/**
 * runTaskGraph for callers that translate every task's error themselves: a failure rejects with the first failed
 * task's own error (an abort with the signal's reason) instead of a TaskGraphError.
 */
export async function runTaskGraphRethrowingFirst(
  tasks: readonly Task[],
  options: RunOptions = {},
): Promise<Map<string, unknown>> {
  try {
    return await runTaskGraph(tasks, options);
  } catch (err) {
    throw err instanceof TaskGraphError ? err.cause : err;
  }
}
