import assert from 'node:assert/strict';
import { confirm, confirmIfInteractive } from '../../cli/confirm.js';
import type { UserError } from '../../lib/errors.js';

describe('confirmations', () => {
  it('-y skips the question; without a terminal and without -y the command refuses, naming the question and -y', async () => {
    const ask = async () => assert.fail('must not ask');
    assert.equal(await confirm('Delete?', { yes: true, interactive: true, ask }), true);
    await assert.rejects(confirm('Delete these 3 identities?', { yes: false, interactive: false, ask }), (err: UserError) => {
      assert.equal(err.message, 'Delete these 3 identities? There is no terminal to ask on.');
      assert.match(err.hint ?? '', /-y/);
      return true;
    });
  });

  it('asks on a terminal and passes the answer on', async () => {
    const asked: string[] = [];
    const no = async (q: string) => (asked.push(q), false);
    assert.equal(await confirm('Delete it?', { yes: false, interactive: true, ask: no }), false);
    assert.equal(await confirmIfInteractive('Continue?', { yes: false, interactive: true, ask: no }), false);
    assert.deepEqual(asked, ['Delete it?', 'Continue?']);
    assert.equal(await confirmIfInteractive('Continue?', { yes: false, interactive: false, ask: no }), true, 'scripts go ahead');
  });
});
