/**
 * The shared task runner behind the cloud providers' create, terminate and IAM: dependency order, concurrency,
 * longest-chain-first scheduling, failure and abort behaviour, graph checks, instrumentation, critical path.
 * (Merged from the AWS, Azure and GCP providers' own tests of their former copies.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import {
  criticalPath,
  currentTask,
  runTaskGraph,
  runTaskGraphRethrowingFirst,
  TaskGraphError,
  topologicalOrder,
  whileWaiting,
  type Task,
} from '../../../providers/common/task-graph.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A promise with its resolve function, to hold a task until the test lets it finish. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** A task that logs its start and end and finishes (or fails) when the test opens its gate. */
function gated(id: string, deps: string[], log: string[], gates: Map<string, () => void>, fail = false): Task {
  return {
    id,
    deps,
    run: () =>
      new Promise<void>((resolve, reject) => {
        log.push(`start ${id}`);
        gates.set(id, () => {
          log.push(`end ${id}`);
          if (fail) reject(new Error(`${id} broke`));
          else resolve();
        });
      }),
  };
}

describe('common task graph', () => {
  it('starts a task only when its last dependency has ended', async () => {
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const done = runTaskGraph([
      gated('a', [], log, gates),
      gated('b', [], log, gates),
      gated('c', ['a', 'b'], log, gates),
    ]);
    await tick();
    assert.deepEqual(log, ['start a', 'start b']);
    gates.get('a')!();
    await tick();
    assert.deepEqual(log, ['start a', 'start b', 'end a']);
    gates.get('b')!();
    await tick();
    assert.deepEqual(log.slice(-2), ['end b', 'start c']);
    gates.get('c')!();
    await done;
  });

  it('starts each task once its dependencies are done, and independent tasks together', async () => {
    const events: string[] = [];
    const task = (id: string, deps: string[] = []) => ({
      id,
      deps,
      run: async () => {
        events.push(`start ${id}`);
        await tick();
        events.push(`end ${id}`);
      },
    });
    await runTaskGraph([task('c', ['a', 'b']), task('a'), task('b')]);
    assert.deepEqual(events.slice(0, 2).sort(), ['start a', 'start b'], 'a and b run concurrently');
    assert.ok(
      events.indexOf('start c') > events.indexOf('end a') && events.indexOf('start c') > events.indexOf('end b'),
    );
  });

  it('runs independent tasks at the same time and hands each task the results (dependsOn form)', async () => {
    const log: string[] = [];
    const bothRunning = gate();
    let running = 0;
    const independent = (id: string): Task => ({
      id,
      dependsOn: ['root'],
      run: async () => {
        log.push(`start ${id}`);
        if (++running === 2) bothRunning.open();
        await bothRunning.promise; // only resolves if a and b run concurrently
        log.push(`end ${id}`);
        return id.toUpperCase();
      },
    });
    const results = await runTaskGraph([
      { id: 'leaf', dependsOn: ['a', 'b'], run: async (r) => `${String(r.get('a'))}+${String(r.get('b'))}` },
      independent('a'),
      independent('b'),
      { id: 'root', dependsOn: [], run: async () => void log.push('root') },
    ]);
    assert.equal(log[0], 'root');
    assert.deepEqual(log.slice(1, 3).sort(), ['start a', 'start b']);
    assert.equal(results.get('leaf'), 'A+B');
  });

  it('counts deps and dependsOn of one task together', async () => {
    const order: string[] = [];
    const task = (id: string, extra: Partial<Task> = {}): Task => ({
      id,
      run: async () => void order.push(id),
      ...extra,
    });
    await runTaskGraph([task('last', { deps: ['a'], dependsOn: ['b'] }), task('a', { deps: ['b'] }), task('b')]);
    assert.deepEqual(order, ['b', 'a', 'last']);
  });

  it('starts the ready task with the longest chain behind it first', async () => {
    const started: string[] = [];
    const task = (id: string, deps: string[] = []) => ({ id, deps, run: async () => void started.push(id) });
    await runTaskGraph([task('leaf'), task('head'), task('middle', ['head']), task('tail', ['middle'])]);
    assert.deepEqual(started.slice(0, 2), ['head', 'leaf']);
  });

  it('after a failure starts nothing new, lets running tasks finish, and reports the first failure', async () => {
    const finished: string[] = [];
    const err = await runTaskGraph([
      { id: 'fails', run: async () => Promise.reject(new Error('boom')) },
      {
        id: 'slow',
        run: async () => {
          await tick();
          await tick();
          finished.push('slow');
        },
      },
      { id: 'after', deps: ['fails'], run: async () => void finished.push('after') },
    ]).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, 'fails');
    assert.match(err.message, /boom/);
    assert.deepEqual(finished, ['slow']);
  });

  it('after a failure does not start even a task whose own dependencies succeeded', async () => {
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const done = runTaskGraph([
      gated('a', [], log, gates, true),
      gated('b', [], log, gates),
      gated('c', ['b'], log, gates),
    ]).catch((e: unknown) => e);
    await tick();
    gates.get('a')!();
    await tick();
    gates.get('b')!();
    const err = await done;
    assert.ok(err instanceof TaskGraphError && err.task === 'a');
    assert.ok(log.includes('end b') && !log.includes('start c'));
  });

  it("onFailure 'skip-dependents': runs what it can, skips the dependents of failures, reports all failures", async () => {
    const ran: string[] = [];
    const task = (id: string, deps: string[], fail = false): Task => ({
      id,
      deps,
      run: async () => {
        ran.push(id);
        if (fail) throw new Error(`${id} broke`);
      },
    });
    const err = await runTaskGraph(
      [task('a', [], true), task('b', ['a']), task('e', ['b']), task('c', []), task('d', ['c'], true)],
      {
        onFailure: 'skip-dependents',
      },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.deepEqual(err.failures.map((f) => f.task).sort(), ['a', 'd']);
    assert.deepEqual(err.failures.map((f) => (f.error as Error).message).sort(), ['a broke', 'd broke']);
    assert.deepEqual(ran.sort(), ['a', 'c', 'd'], 'b and e (after the failed a) never ran');
  });

  it("onFailure 'skip-dependents': an abort still stops starting tasks", async () => {
    const abort = new AbortController();
    const ran: string[] = [];
    const err = await runTaskGraph(
      [
        {
          id: 'a',
          run: async () => {
            ran.push('a');
            abort.abort();
          },
        },
        { id: 'b', deps: ['a'], run: async () => void ran.push('b') },
      ],
      { signal: abort.signal, onFailure: 'skip-dependents' },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, '(aborted)');
    assert.deepEqual(ran, ['a']);
  });

  it('reports the other failures of tasks that were running', async () => {
    const both = gate();
    let started = 0;
    const failing = (id: string): Task => ({
      id,
      run: async () => {
        if (++started === 2) both.open();
        await both.promise;
        throw new Error(`${id} broke`);
      },
    });
    const err = await runTaskGraph([failing('x'), failing('y')]).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, 'x');
    assert.deepEqual(
      err.otherFailures.map((f) => [f.task, (f.error as Error).message]),
      [['y', 'y broke']],
    );
  });

  it('the rethrowing variant starts nothing new after a failure, waits for running tasks, and throws the first error itself', async () => {
    const slow = gate();
    const finished: string[] = [];
    const quota = new Error('quota');
    const run = runTaskGraphRethrowingFirst([
      {
        id: 'fails',
        dependsOn: [],
        run: async () => {
          throw quota;
        },
      },
      {
        id: 'slow',
        dependsOn: [],
        run: async () => {
          await slow.promise;
          finished.push('slow');
        },
      },
      { id: 'after', dependsOn: ['slow'], run: async () => void finished.push('after') },
    ]);
    setImmediate(slow.open);
    await assert.rejects(run, (e) => e === quota);
    assert.deepEqual(finished, ['slow'], 'the running task finished, its dependent never started');
  });

  it('rejects duplicate ids, unknown dependencies and cycles', async () => {
    const noop = async () => {};
    assert.throws(
      () =>
        topologicalOrder([
          { id: 'a', deps: ['b'], run: noop },
          { id: 'b', deps: ['a'], run: noop },
        ]),
      /cycle: a -> b -> a/,
    );
    assert.throws(() => topologicalOrder([{ id: 'a', deps: ['x'], run: noop }]), /unknown task "x"/);
    assert.throws(
      () =>
        topologicalOrder([
          { id: 'a', run: noop },
          { id: 'a', run: noop },
        ]),
      /duplicate task id "a"/,
    );
    await assert.rejects(
      runTaskGraph([{ id: 'a', dependsOn: ['missing'], run: async () => 1 }]),
      /unknown task "missing"/,
    );
    await assert.rejects(
      runTaskGraph([
        { id: 'a', dependsOn: ['b'], run: async () => 1 },
        { id: 'b', dependsOn: ['a'], run: async () => 1 },
      ]),
      /cycle/,
    );
  });

  it('tells code which task it runs in and whether it waits', async () => {
    const seen: unknown[] = [];
    await runTaskGraph([
      {
        id: 't1',
        run: async () => {
          seen.push(currentTask());
          await whileWaiting(async () => seen.push(currentTask()));
        },
      },
    ]);
    assert.deepEqual(seen, [
      { task: 't1', waiting: false },
      { task: 't1', waiting: true },
    ]);
    assert.equal(currentTask(), undefined);
  });

  it('calls the start and end hooks of every task, with the error of a failed one', async () => {
    const events: string[] = [];
    await runTaskGraph(
      [
        { id: 'a', run: async () => {} },
        { id: 'b', deps: ['a'], run: async () => Promise.reject(new Error('no')) },
      ],
      {
        onTaskStart: (t) => events.push(`start ${t.id}`),
        onTaskEnd: (t, e) => events.push(`end ${t.id}${e ? ` ${(e as Error).message}` : ''}`),
      },
    ).catch(() => undefined);
    assert.deepEqual(events, ['start a', 'end a', 'start b', 'end b no']);
  });

  it('an abort stops starting tasks', async () => {
    const abort = new AbortController();
    const ran: string[] = [];
    const err = await runTaskGraph(
      [
        {
          id: 'a',
          run: async () => {
            ran.push('a');
            abort.abort();
          },
        },
        { id: 'b', deps: ['a'], run: async () => void ran.push('b') },
      ],
      { signal: abort.signal },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, '(aborted)');
    assert.deepEqual(ran, ['a']);
  });

  it('computes the critical path', () => {
    const tasks = [
      { id: 'rg', dependsOn: [] },
      { id: 'ip', dependsOn: ['rg'] },
      { id: 'lb', dependsOn: ['ip'] },
      { id: 'nsg', dependsOn: ['rg'] },
      { id: 'vmss', dependsOn: ['lb', 'nsg'] },
    ];
    const cost: Record<string, number> = { rg: 1, ip: 2, lb: 3, nsg: 10, vmss: 4 };
    assert.deepEqual(
      criticalPath(tasks, (id) => cost[id]),
      { length: 15, path: ['rg', 'nsg', 'vmss'] },
    );
    const withDeps = [
      { id: 'net', deps: [] },
      { id: 'subnet', deps: ['net'] },
      { id: 'hc', deps: [] },
      { id: 'bs', deps: ['hc', 'subnet'] },
    ];
    const weights: Record<string, number> = { net: 2, subnet: 2, hc: 1, bs: 3 };
    assert.deepEqual(
      criticalPath(withDeps, (id) => weights[id]),
      { length: 7, path: ['net', 'subnet', 'bs'] },
    );
  });
});
