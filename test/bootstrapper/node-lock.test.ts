import assert from 'node:assert/strict';
import { NodeLock, NodeLockError } from '../../bootstrapper/node-lock.js';

describe('bootstrapper/node-lock', () => {
  it('hands the first owner a token and nobody else one', () => {
    const lock = new NodeLock();
    const token = lock.tryLock('recover');
    assert.equal(token?.owner, 'recover');
    assert.equal(lock.tryLock('join'), undefined);
    assert.equal(lock.tryLock('init'), undefined);
    assert.equal(lock.tryLock('recover'), undefined, 'not even the same owner twice');
    assert.equal(lock.owner, 'recover');
  });

  it("accepts only the holder's own token, and only for the owners a step names", () => {
    const lock = new NodeLock();
    const token = lock.tryLock('join')!;
    lock.check(token, 'open the state disk');
    assert.throws(
      () => lock.check({ owner: 'join' }, 'open the state disk'),
      NodeLockError,
      'a look-alike is no token',
    );
    assert.throws(
      () => lock.check(undefined, 'open the state disk'),
      /does not hold the node lock \(it is held by join\)/,
    );
    assert.throws(() => lock.check(token, 'create the cluster store', ['init']), /not a step of join \(only of init\)/);
  });

  it('gives a provisional hold back, and a released token opens nothing', () => {
    const lock = new NodeLock();
    const recover = lock.tryLock('recover')!;
    lock.release(recover);
    assert.equal(lock.locked, false);
    assert.throws(() => lock.check(recover, 'open the state disk'), /not held/);
    const join = lock.tryLock('join');
    assert.ok(join, 'the next owner takes it');
  });

  it('never releases a committed hold, and tells its listeners once', () => {
    const lock = new NodeLock();
    const seen: string[] = [];
    lock.onCommitted((owner) => seen.push(owner));
    const token = lock.tryLock('join')!;
    assert.equal(seen.length, 0, 'a provisional hold is not announced');
    lock.commit(token);
    lock.commit(token);
    assert.throws(() => lock.release(token), /committed and is never released/);
    lock.onCommitted((owner) => seen.push(`late ${owner}`));
    assert.deepEqual(seen, ['join', 'late join']);
    assert.equal(lock.committed, true);
  });
});
