/**
 * A dependency-ordered, concurrent task runner: every task starts as soon as all tasks it depends on have
 * finished, so independent cloud calls overlap and the dependency order stays explicit in code.
 * When a task fails, no further task starts; tasks already running are allowed to finish (so that whatever
 * they made gets recorded), then the first failure is thrown as TaskGraphError.
 *
 * Hand-written (no library in the dependency set does this; listr2 runs lists, not graphs). Generic: it could
 * move to lib/ once the other cloud providers have their copies. Each task runs inside an AsyncLocalStorage
 * context, so instrumentation (the bench) can attribute API calls to the task that made them.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface Task {
  id: string;
  /** ids of tasks that must finish first; unknown ids are a programming error. */
  deps?: readonly string[];
  run: () => Promise<void>;
}

/** What is known about the task the current code runs in. */
export interface TaskContext {
  task: string;
  /** True while the task waits for a long-running operation (waiter polls are not counted as work). */
  waiting: boolean;
}

const taskStorage = new AsyncLocalStorage<TaskContext>();

export function currentTask(): TaskContext | undefined {
  return taskStorage.getStore();
}

/** Runs `fn` marked as waiting for a long-running operation of the current task. */
export function whileWaiting<T>(fn: () => Promise<T>): Promise<T> {
  const current = taskStorage.getStore();
  return current ? taskStorage.run({ ...current, waiting: true }, fn) : fn();
}

export class TaskGraphError extends Error {
  constructor(
    readonly task: string,
    override readonly cause: unknown,
    /** ids of other tasks that failed while the first failure let running tasks finish. */
    readonly otherFailures: { task: string; error: unknown }[],
  ) {
    super(`task ${task} failed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'TaskGraphError';
  }
}

export interface RunOptions {
  signal?: AbortSignal;
  /** Called when a task starts and ends (progress lines, instrumentation). */
  onTaskStart?: (task: Task) => void;
  onTaskEnd?: (task: Task, error?: unknown) => void;
}

/** Checks the graph (unique ids, known deps, no cycles) and returns the tasks in a topological order. */
export function topologicalOrder(tasks: readonly Task[]): Task[] {
  const byId = new Map<string, Task>();
  for (const t of tasks) {
    if (byId.has(t.id)) throw new Error(`duplicate task id ${t.id}`);
    byId.set(t.id, t);
  }
  const order: Task[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (t: Task, path: string[]): void => {
    if (state.get(t.id) === 'done') return;
    if (state.get(t.id) === 'visiting') throw new Error(`dependency cycle: ${[...path, t.id].join(' -> ')}`);
    state.set(t.id, 'visiting');
    for (const dep of t.deps ?? []) {
      const d = byId.get(dep);
      if (!d) throw new Error(`task ${t.id} depends on unknown task ${dep}`);
      visit(d, [...path, t.id]);
    }
    state.set(t.id, 'done');
    order.push(t);
  };
  for (const t of tasks) visit(t, []);
  return order;
}

/**
 * How many tasks, at most, still depend on each task one after another (its "height"). When several tasks
 * become ready at once, the highest starts first: every start costs CPU (serialising and signing a request),
 * so the chain that decides the total time is not kept waiting behind leaves.
 */
function heights(order: Task[]): Map<string, number> {
  const dependents = new Map<string, string[]>();
  for (const t of order) for (const d of t.deps ?? []) dependents.set(d, [...(dependents.get(d) ?? []), t.id]);
  const height = new Map<string, number>();
  for (const t of [...order].reverse()) {
    height.set(t.id, 1 + Math.max(0, ...(dependents.get(t.id) ?? []).map((x) => height.get(x)!)));
  }
  return height;
}

export async function runTaskGraph(tasks: readonly Task[], options: RunOptions = {}): Promise<void> {
  const height = heights(topologicalOrder(tasks));
  const byPriority = [...tasks].sort((a, b) => height.get(b.id)! - height.get(a.id)!);
  const done = new Set<string>();
  const started = new Set<string>();
  const running = new Map<string, Promise<void>>();
  const failures: { task: string; error: unknown }[] = [];

  const ready = (t: Task) => !started.has(t.id) && (t.deps ?? []).every((d) => done.has(d));

  const start = (t: Task) => {
    started.add(t.id);
    options.onTaskStart?.(t);
    const p = taskStorage
      .run({ task: t.id, waiting: false }, () => t.run())
      .then(
        () => {
          done.add(t.id);
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
    if (failures.length === 0 && !options.signal?.aborted) {
      for (const t of byPriority) if (ready(t)) start(t);
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  if (failures.length > 0) {
    const [first, ...others] = failures;
    throw new TaskGraphError(first.task, first.error, others);
  }
  if (done.size < tasks.length) {
    // Only an abort leaves tasks unstarted without a failure.
    throw new TaskGraphError('(aborted)', options.signal?.reason ?? new Error('aborted'), []);
  }
}
