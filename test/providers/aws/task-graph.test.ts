import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { currentTask, runTaskGraph, TaskGraphError, topologicalOrder, whileWaiting } from '../../../providers/aws/task-graph.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('aws provider: task graph', () => {
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
    assert.ok(events.indexOf('start c') > events.indexOf('end a') && events.indexOf('start c') > events.indexOf('end b'));
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
      { id: 'slow', run: async () => { await tick(); await tick(); finished.push('slow'); } },
      { id: 'after', deps: ['fails'], run: async () => void finished.push('after') },
    ]).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, 'fails');
    assert.match(err.message, /boom/);
    assert.deepEqual(finished, ['slow']);
  });

  it('rejects cycles and unknown dependencies', () => {
    assert.throws(() => topologicalOrder([{ id: 'a', deps: ['b'], run: async () => {} }, { id: 'b', deps: ['a'], run: async () => {} }]), /cycle: a -> b -> a/);
    assert.throws(() => topologicalOrder([{ id: 'a', deps: ['x'], run: async () => {} }]), /unknown task x/);
  });

  it('tells code which task it runs in and whether it waits', async () => {
    const seen: unknown[] = [];
    await runTaskGraph([{ id: 't1', run: async () => { seen.push(currentTask()); await whileWaiting(async () => seen.push(currentTask())); } }]);
    assert.deepEqual(seen, [{ task: 't1', waiting: false }, { task: 't1', waiting: true }]);
    assert.equal(currentTask(), undefined);
  });

  it('an abort stops starting tasks', async () => {
    const abort = new AbortController();
    const ran: string[] = [];
    const err = await runTaskGraph(
      [
        { id: 'a', run: async () => { ran.push('a'); abort.abort(); } },
        { id: 'b', deps: ['a'], run: async () => void ran.push('b') },
      ],
      { signal: abort.signal },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.deepEqual(ran, ['a']);
  });
});
