import assert from 'node:assert/strict';
import { confirmDestruction, confirmIfInteractive } from '../../lib/cluster/confirm.js';

describe('confirmations', () => {
  it('-y skips the question; without a terminal and without -y nothing is destroyed', async () => {
    const ask = async () => assert.fail('must not ask');
    assert.equal(await confirmDestruction('Delete?', { yes: true, interactive: true, ask }), true);
    await assert.rejects(confirmDestruction('Delete?', { yes: false, interactive: false, ask }), (err: Error & { hint?: string }) => {
      assert.match(err.hint ?? '', /-y/);
      return true;
    });
  });

  it('asks on a terminal and passes the answer on', async () => {
    const asked: string[] = [];
    const no = async (q: string) => (asked.push(q), false);
    assert.equal(await confirmDestruction('Delete it?', { yes: false, interactive: true, ask: no }), false);
    assert.equal(await confirmIfInteractive('Continue?', { yes: false, interactive: true, ask: no }), false);
    assert.deepEqual(asked, ['Delete it?', 'Continue?']);
    assert.equal(await confirmIfInteractive('Continue?', { yes: false, interactive: false, ask: no }), true, 'scripts go ahead');
  });
});
