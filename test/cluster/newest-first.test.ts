import assert from 'node:assert/strict';
import { newestFirst } from '../../cli/cluster/newest-first.js';
import type { Instance } from '../../providers/contract.js';

const node = (name: string, createdAt?: string, id = `id-${name}`): Instance => ({
  id,
  name,
  role: 'control-plane',
  nodeGroup: 'cp',
  privateIp: '10.0.0.1',
  state: 'running',
  ...(createdAt ? { createdAt } : {}),
});

/** Every order of a list (the orders a provider could list instances in). */
function permutations<T>(items: T[]): T[][] {
  if (items.length <= 1) return [items];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

describe('apply: which nodes a scale-in removes', () => {
  it('takes the newest by the creation time the provider reports, whatever the names say', () => {
    const cloud = [
      node('cp-zz', '2026-01-01T00:00:00Z'),
      node('cp-aa', '2026-03-01T00:00:00Z'),
      node('cp-mm', '2026-02-01T00:00:00Z'),
    ];
    assert.deepEqual(
      newestFirst(cloud).map((n) => n.name),
      ['cp-aa', 'cp-mm', 'cp-zz'],
    );
  });

  it('falls back to the number in the name only when some node has no creation time (local records of earlier versions)', () => {
    const local = [node('control-plane-2'), node('control-plane-10', '2026-01-01T00:00:00Z'), node('control-plane-0')];
    assert.deepEqual(
      newestFirst(local).map((n) => n.name),
      ['control-plane-10', 'control-plane-2', 'control-plane-0'],
    );
  });

  it('orders instances launched in the same second (EC2 LaunchTime) the same way whatever order the provider lists them in', () => {
    // Two launched together at :05, one earlier; EC2 names carry no number, so the id decides between the two.
    const ec2 = [
      node('ip-10-0-1-7.ec2.internal', '2026-01-01T00:00:05.000Z', 'i-0a1'),
      node('ip-10-0-1-9.ec2.internal', '2026-01-01T00:00:05.000Z', 'i-0f2'),
      node('ip-10-0-1-3.ec2.internal', '2026-01-01T00:00:01.000Z', 'i-0ff'),
    ];
    for (const order of permutations(ec2))
      assert.deepEqual(
        newestFirst(order).map((n) => n.id),
        ['i-0f2', 'i-0a1', 'i-0ff'],
      );
  });

  it('compares times as instants, not strings: a fraction of a second later is newer, and the same instant in two spellings ties', () => {
    const mixed = [
      node('a', '2026-01-01T00:00:05Z', 'id-1'),
      node('b', '2026-01-01T00:00:05.250Z', 'id-2'),
      node('c', '2026-01-01T01:00:05+01:00', 'id-3'),
    ];
    // b is 250 ms newer; a and c are the same instant (c in +01:00), so the id decides: id-3 before id-1.
    assert.deepEqual(
      newestFirst(mixed).map((n) => n.name),
      ['b', 'c', 'a'],
    );
  });

  it('breaks a tie in time by the number in local names before the id', () => {
    const local = [
      node('control-plane-3', '2026-01-01T00:00:00Z', 'z'),
      node('control-plane-12', '2026-01-01T00:00:00Z', 'a'),
    ];
    assert.deepEqual(
      newestFirst(local).map((n) => n.name),
      ['control-plane-12', 'control-plane-3'],
    );
  });
});
