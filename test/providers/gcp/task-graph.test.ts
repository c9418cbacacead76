/** The GCP provider's dependency-ordered task runner and its longest-chain computation. */
import assert from 'node:assert/strict';
import { longestChain, runTaskGraph, TaskFailedError, TaskGraphError, type Task } from '../../../providers/gcp/task-graph.js';

/** A task that logs its start and end and finishes when the test releases it. */
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

const tick = () => new Promise((r) => setImmediate(r));

describe('GCP task graph', () => {
  it('starts independent tasks together and dependent ones after their dependencies', async () => {
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const done = runTaskGraph([gated('a', [], log, gates), gated('b', [], log, gates), gated('c', ['a', 'b'], log, gates)], { stopOnError: true });
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

  it('stopOnError: starts nothing new, lets running tasks finish, throws the first failure', async () => {
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const done = runTaskGraph([gated('a', [], log, gates, true), gated('b', [], log, gates), gated('c', ['b'], log, gates)], { stopOnError: true }).catch((e: unknown) => e);
    await tick();
    gates.get('a')!();
    await tick();
    gates.get('b')!();
    const err = await done;
    assert.ok(err instanceof TaskFailedError && err.taskId === 'a');
    assert.ok(log.includes('end b') && !log.includes('start c'));
  });

  it('without stopOnError: runs what it can, skips dependents of failures, reports all failures', async () => {
    const ran: string[] = [];
    const task = (id: string, deps: string[], fail = false): Task => ({ id, deps, run: async () => { ran.push(id); if (fail) throw new Error(`${id} broke`); } });
    const err = await runTaskGraph([task('a', [], true), task('b', ['a']), task('c', []), task('d', ['c'], true)], { stopOnError: false }).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.deepEqual(err.failures.map((f) => f.taskId).sort(), ['a', 'd']);
    assert.deepEqual(ran.sort(), ['a', 'c', 'd']);
  });

  it('rejects unknown dependencies and cycles', async () => {
    const noop = async () => undefined;
    await assert.rejects(runTaskGraph([{ id: 'a', deps: ['x'], run: noop }], { stopOnError: true }), /unknown task x/);
    await assert.rejects(runTaskGraph([{ id: 'a', deps: ['b'], run: noop }, { id: 'b', deps: ['a'], run: noop }], { stopOnError: true }), /cycle/);
  });

  it('finds the heaviest chain', () => {
    const tasks = [
      { id: 'net', deps: [] },
      { id: 'subnet', deps: ['net'] },
      { id: 'hc', deps: [] },
      { id: 'bs', deps: ['hc', 'subnet'] },
    ];
    const weights: Record<string, number> = { net: 2, subnet: 2, hc: 1, bs: 3 };
    assert.deepEqual(longestChain(tasks, (id) => weights[id]!), { total: 7, chain: ['net', 'subnet', 'bs'] });
  });
});
