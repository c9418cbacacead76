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
    assert.equal((await readRequiredFile(path.join(dir, 'a'), 'the file', 'hint', 1024)).toString(), 'content');
  });

  it('names a missing file and says what to do', async () => {
    const file = path.join(dir, 'missing.yaml');
    await assert.rejects(
      readRequiredFile(file, 'the state file', 'Run create first.', 1024),
      (err: Error) =>
        err instanceof UserError &&
        err.message === `The state file ${file} does not exist.` &&
        err.hint === 'Run create first.',
    );
  });

  it('refuses a directory where the file should be, naming it', async () => {
    await assert.rejects(
      readRequiredFile(dir, 'the state file', 'unused', 1024),
      (err: Error) =>
        err instanceof UserError && err.message.startsWith(`The state file ${dir} is a directory, not a regular file`),
    );
  });

  it('turns any other read error into a UserError naming the file', async () => {
    await fs.writeFile(path.join(dir, 'plain'), 'x');
    const file = path.join(dir, 'plain', 'state.yaml');
    await assert.rejects(
      readRequiredFile(file, 'the state file', 'unused', 1024),
      (err: Error) =>
        err instanceof UserError &&
        err.message.startsWith(`Cannot read the state file ${file}: `) &&
        /ENOTDIR/.test(err.message),
    );
  });
});
