import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  confirm,
  confirmIfInteractive,
  confirmIfInteractiveOrStop,
  confirmOrStop,
  DeclinedError,
  EXIT_DECLINED,
} from '../../cli/confirm.js';
import { REPO_ROOT } from '../support/cli.js';
import type { UserError } from '../../lib/errors.js';

describe('confirmations', () => {
  it('-y skips the question; without a terminal and without -y the command refuses, naming the question and -y', async () => {
    const ask = async () => assert.fail('must not ask');
    assert.equal(await confirm('Delete?', { yes: true, interactive: true, ask }), true);
    await assert.rejects(
      confirm('Delete these 3 identities?', { yes: false, interactive: false, ask }),
      (err: UserError) => {
        assert.equal(err.message, 'Delete these 3 identities? There is no terminal to ask on.');
        assert.match(err.hint ?? '', /-y/);
        return true;
      },
    );
  });

  it('asks on a terminal and passes the answer on', async () => {
    const asked: string[] = [];
    const no = async (q: string) => (asked.push(q), false);
    assert.equal(await confirm('Delete it?', { yes: false, interactive: true, ask: no }), false);
    assert.equal(await confirmIfInteractive('Continue?', { yes: false, interactive: true, ask: no }), false);
    assert.deepEqual(asked, ['Delete it?', 'Continue?']);
    assert.equal(
      await confirmIfInteractive('Continue?', { yes: false, interactive: false, ask: no }),
      true,
      'scripts go ahead',
    );
  });

  it('a "no" stops the command with a DeclinedError that says what was not done (exit code 1)', async () => {
    const no = async () => false;
    for (const stop of [confirmOrStop, confirmIfInteractiveOrStop]) {
      await assert.rejects(
        stop('Delete it?', { yes: false, interactive: true, ask: no }, 'Nothing was deleted.'),
        (err: unknown) => {
          assert.ok(err instanceof DeclinedError);
          assert.equal(err.message, 'Nothing was deleted.');
          assert.equal(err.exitCode, EXIT_DECLINED);
          assert.equal(EXIT_DECLINED, 1);
          return true;
        },
      );
    }
    await confirmOrStop('Delete it?', { yes: true }, 'Nothing was deleted.');
  });

  it('every command asks through confirmOrStop, so a "no" ends each the same way', async () => {
    const commands = path.join(REPO_ROOT, 'cli', 'commands');
    const files = (await fs.readdir(commands, { recursive: true })).filter((f) => f.endsWith('.ts'));
    for (const file of files) {
      const text = await fs.readFile(path.join(commands, file), 'utf8');
      assert.doesNotMatch(text, /\bconfirm(IfInteractive)?\(/, `${file} asks with confirm() and handles "no" itself`);
    }
  });
});
