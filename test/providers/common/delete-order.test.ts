/** The shared reverse-dependency deleter behind the cloud providers' terminate and `iam destroy`. */
import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';
import type { RecordedResource } from '../../../providers/contract.js';
import { deleteInReverseDependencyOrder } from '../../../providers/common/delete-order.js';
import { TaskGraphError } from '../../../providers/common/task-graph.js';

const tick = () => new Promise((r) => setImmediate(r));

// vpc <- subnet <- instance, vpc <- gateway: instance and gateway can go at once, the vpc last.
const RESOURCES: RecordedResource[] = [
  { kind: 'x:vpc', id: 'vpc' },
  { kind: 'x:subnet', id: 'subnet', dependsOn: ['vpc'] },
  { kind: 'x:gateway', id: 'gateway', name: 'the gateway', dependsOn: ['vpc'] },
  { kind: 'x:instance', id: 'instance', dependsOn: ['subnet'] },
];

describe('common reverse-dependency deleter', () => {
  it('deletes dependents first, independent ones concurrently, and forgets each at once', async () => {
    const journal = new MemoryResourceJournal(RESOURCES);
    const events: string[] = [];
    const progress: string[] = [];
    await deleteInReverseDependencyOrder(RESOURCES, {
      journal,
      progress: (m) => progress.push(m),
      deleteOne: async (r) => {
        events.push(`start ${r.id}`);
        await tick();
        assert.ok(
          (await journal.list()).some((x) => x.id === r.id),
          'still recorded while being deleted',
        );
        events.push(`end ${r.id}`);
      },
    });
    const at = (e: string) => events.indexOf(e);
    assert.deepEqual(events.slice(0, 2).sort(), ['start gateway', 'start instance']);
    assert.ok(at('start subnet') > at('end instance'));
    assert.ok(at('start vpc') > at('end subnet') && at('start vpc') > at('end gateway'));
    assert.deepEqual(await journal.list(), []);
    assert.ok(progress.includes('deleting the gateway') && progress.includes('deleting vpc'));
  });

  it('adds the provider order, forgets only what the journal held, and names resources as told', async () => {
    const journal = new MemoryResourceJournal([RESOURCES[0]]);
    const extra: RecordedResource = { kind: 'x:address', id: 'address' };
    const order: string[] = [];
    const progress: string[] = [];
    await deleteInReverseDependencyOrder([RESOURCES[0], extra], {
      journal,
      forget: (r) => r.id === 'vpc',
      deleteBefore: (first) => first.kind === 'x:vpc', // the vpc goes before anything else here
      describe: (r) => r.kind,
      progress: (m) => progress.push(m),
      deleteOne: async (r) => void order.push(r.id),
    });
    assert.deepEqual(order, ['vpc', 'address']);
    assert.deepEqual(progress, ['deleting x:vpc', 'deleting x:address']);
    assert.deepEqual(await journal.list(), []);
  });

  it('retries a delete refused as in use, and gives up after the attempts', async () => {
    const journal = new MemoryResourceJournal([RESOURCES[0]]);
    let calls = 0;
    const logged: unknown[] = [];
    const inUse = Object.assign(new Error('in use'), { name: 'DependencyViolation' });
    const options = {
      journal,
      log: {
        debug: (_m: string, f?: Record<string, unknown>) => void logged.push(f),
        info: () => undefined,
        warn: () => undefined,
      },
      inUseRetry: { inUse: (e: unknown) => (e === inUse ? 'DependencyViolation' : undefined), attempts: 3, delayMs: 1 },
    };
    const refusedTwice = async () => {
      if (++calls < 3) throw inUse;
    };
    await deleteInReverseDependencyOrder([RESOURCES[0]], { ...options, deleteOne: refusedTwice });
    assert.equal(calls, 3);
    assert.deepEqual(logged, [
      { resource: 'vpc', code: 'DependencyViolation', attempt: 1 },
      { resource: 'vpc', code: 'DependencyViolation', attempt: 2 },
    ]);

    calls = 0;
    await journal.record(RESOURCES[0]);
    const err = await deleteInReverseDependencyOrder([RESOURCES[0]], {
      ...options,
      deleteOne: async () => {
        calls++;
        throw inUse;
      },
    }).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError && err.cause === inUse);
    assert.equal(calls, 3);
    assert.equal((await journal.list()).length, 1, 'what is not deleted stays recorded');
  });

  it('stops after a failure: dependencies of the failed resource stay, and so do their records', async () => {
    const journal = new MemoryResourceJournal(RESOURCES);
    const deleted: string[] = [];
    const err = await deleteInReverseDependencyOrder(RESOURCES, {
      journal,
      deleteOne: async (r) => {
        if (r.id === 'instance') throw new Error('refused');
        await tick();
        deleted.push(r.id);
      },
    }).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, 'instance');
    assert.deepEqual(deleted, ['gateway'], 'the running delete finished; nothing new started');
    assert.deepEqual(
      (await journal.list()).map((r) => r.id),
      ['vpc', 'subnet', 'instance'],
    );
  });

  it("with onFailure 'skip-dependents' deletes everything that does not wait for the failed resource", async () => {
    const disk: RecordedResource[] = [
      { kind: 'x:disk', id: 'disk' },
      { kind: 'x:attachment', id: 'attachment', dependsOn: ['disk'] },
    ];
    const journal = new MemoryResourceJournal([...RESOURCES, ...disk]);
    const deleted: string[] = [];
    const err = await deleteInReverseDependencyOrder([...RESOURCES, ...disk], {
      journal,
      onFailure: 'skip-dependents',
      deleteOne: async (r) => {
        if (r.id === 'instance') throw new Error('refused');
        await tick();
        deleted.push(r.id);
      },
    }).catch((e: unknown) => e);
    assert.ok(err instanceof TaskGraphError);
    assert.equal(err.task, 'instance');
    assert.deepEqual(deleted.sort(), ['attachment', 'disk', 'gateway'], 'the disk started after the failure');
    assert.deepEqual(
      (await journal.list()).map((r) => r.id),
      ['vpc', 'subnet', 'instance'],
    );
  });
});
