/**
 * Shows a long command's steps as a task list (listr2): spinners and the latest detail of the running step on a
 * terminal, plain lines (`❯ step`, `› detail`, `✔ step`) when the output is not one, nothing under --json.
 * The library call drives it: it reports `(step, message?)` as it goes; steps it never reports are shown as
 * skipped (already done by an earlier run). The library's own error is what the caller gets back.
 */
export interface StepDefinition<S extends string> {
  id: S;
  title: string;
}

export type StepReport<S extends string> = (step: S, message?: string) => void;
export type RendererKind = 'default' | 'simple' | 'silent';

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // a step that never ran must not become an unhandled rejection
  return { promise, resolve, reject };
}

/** The renderer for this output: a task list on a terminal (that has a width), plain lines otherwise. */
export function rendererFor(stream: NodeJS.WriteStream, json: boolean): RendererKind {
  if (json) return 'silent';
  return stream.isTTY && stream.columns > 0 ? 'default' : 'simple';
}

export async function runWithSteps<S extends string, T>(
  steps: readonly StepDefinition<S>[],
  renderer: RendererKind,
  fn: (report: StepReport<S>) => Promise<T>,
): Promise<T> {
  const { Listr } = await import('listr2');
  const begun = steps.map(() => deferred<'run' | 'skip'>());
  const finished = steps.map(() => deferred<void>());
  const listeners: Array<((message: string) => void) | undefined> = steps.map(() => undefined);
  const pending: Array<string | undefined> = steps.map(() => undefined);
  let current = -1;

  const advanceTo = (index: number) => {
    if (index <= current) return;
    if (current >= 0) finished[current].resolve();
    for (let i = current + 1; i < index; i++) begun[i].resolve('skip');
    current = index;
    if (index < steps.length) begun[index].resolve('run');
  };
  const report: StepReport<S> = (step, message) => {
    const index = steps.findIndex((s) => s.id === step);
    if (index < 0) return;
    advanceTo(index);
    if (message === undefined || index !== current) return;
    if (listeners[index]) listeners[index](message);
    else pending[index] = message;
  };

  const list = new Listr(
    steps.map((step, i) => ({
      title: step.title,
      task: async (_ctx: unknown, task: { output: string; skip(message?: string): void }) => {
        if ((await begun[i].promise) === 'skip') {
          task.skip(`${step.title}: already done`);
          return;
        }
        listeners[i] = (message) => {
          task.output = message;
        };
        if (pending[i] !== undefined) task.output = pending[i];
        await finished[i].promise;
      },
    })),
    // Ctrl-C is the CLI's to handle (cli/interrupt.ts); listr2's own handler would exit with 127 and say nothing.
    { renderer, exitOnError: true, registerSignalListeners: false, rendererOptions: { collapseErrors: false } },
  );
  const shown = list.run().catch(() => undefined);
  try {
    const result = await fn(report);
    advanceTo(steps.length);
    return result;
  } catch (err) {
    const index = Math.max(current, 0);
    advanceTo(index);
    // The list shows the first line; the caller prints the whole error with its hint.
    finished[index].reject(new Error(String((err as Error).message ?? err).split('\n')[0]));
    throw err;
  } finally {
    await shown;
  }
}
