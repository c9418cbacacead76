import assert from 'node:assert/strict';
import { NodeLock } from '../../bootstrapper/node-lock.js';

describe('bootstrapper/node-lock', () => {
  it('locks once, for the first owner, and never unlocks', () => {
    const lock = new NodeLock();
    const seen: string[] = [];
    lock.onLocked((owner) => seen.push(owner));
    assert.equal(lock.locked, false);
    assert.equal(lock.tryLock('join'), true);
    assert.equal(lock.tryLock('init'), false);
    assert.equal(lock.tryLock('join'), false);
    assert.equal(lock.owner, 'join');
    lock.onLocked((owner) => seen.push(`late ${owner}`));
    assert.deepEqual(seen, ['join', 'late join']);
  });
});
