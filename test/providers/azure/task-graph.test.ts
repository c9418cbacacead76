/** The dependency-ordered task runner behind create and terminate, and the critical path the bench uses. */
import assert from 'node:assert/strict';
import { criticalPath, runTaskGraph, type GraphTask } from '../../../providers/azure/task-graph.js';

/** A promise with its resolve function, to hold a task until the test lets it finish. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('azure task graph', function () {
  it('starts each task after its dependencies and runs independent tasks at the same time', async function () {
    const log: string[] = [];
    const bothRunning = gate();
    let running = 0;
    const independent = (id: string): GraphTask => ({
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

  it('starts nothing new after a failure, waits for running tasks, and throws the first error', async function () {
    const slow = gate();
    const finished: string[] = [];
    const run = runTaskGraph([
      { id: 'fails', dependsOn: [], run: async () => { throw new Error('quota'); } },
      { id: 'slow', dependsOn: [], run: async () => { await slow.promise; finished.push('slow'); } },
      { id: 'after', dependsOn: ['slow'], run: async () => void finished.push('after') },
    ]);
    setImmediate(slow.open);
    await assert.rejects(run, /quota/);
    assert.deepEqual(finished, ['slow'], 'the running task finished, its dependent never started');
  });

  it('rejects unknown dependencies and cycles', async function () {
    await assert.rejects(runTaskGraph([{ id: 'a', dependsOn: ['missing'], run: async () => 1 }]), /unknown task "missing"/);
    await assert.rejects(
      runTaskGraph([
        { id: 'a', dependsOn: ['b'], run: async () => 1 },
        { id: 'b', dependsOn: ['a'], run: async () => 1 },
      ]),
      /cycle/,
    );
  });

  it('computes the critical path', function () {
    const tasks = [
      { id: 'rg', dependsOn: [] },
      { id: 'ip', dependsOn: ['rg'] },
      { id: 'lb', dependsOn: ['ip'] },
      { id: 'nsg', dependsOn: ['rg'] },
      { id: 'vmss', dependsOn: ['lb', 'nsg'] },
    ];
    const cost: Record<string, number> = { rg: 1, ip: 2, lb: 3, nsg: 10, vmss: 4 };
    assert.deepEqual(criticalPath(tasks, (id) => cost[id]), { length: 15, path: ['rg', 'nsg', 'vmss'] });
  });
});
