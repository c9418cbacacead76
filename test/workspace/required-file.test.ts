import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { readRequiredFile } from '../../lib/workspace/required-file.js';

describe('workspace/required-file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'required-file-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('returns the bytes of a file that exists', async () => {
    await fs.writeFile(path.join(dir, 'a'), 'content');
    assert.equal((await readRequiredFile(path.join(dir, 'a'), 'the file', 'hint')).toString(), 'content');
  });

  it('names a missing file and says what to do', async () => {
    const file = path.join(dir, 'missing.yaml');
    await assert.rejects(
      readRequiredFile(file, 'the state file', 'Run create first.'),
      (err: Error) => err instanceof UserError && err.message === `The state file ${file} does not exist.` && err.hint === 'Run create first.',
    );
  });

  it('turns any other read error into a UserError naming the file', async () => {
    await assert.rejects(
      readRequiredFile(dir, 'the state file', 'unused'),
      (err: Error) => err instanceof UserError && err.message.startsWith(`Cannot read the state file ${dir}: `) && /EISDIR/.test(err.message),
    );
  });
});
