/** Workspace and node files are opened without following links, as regular files of bounded size (issue 13, items 4 and 6). */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDebugLog } from '../../lib/logging/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { acquireWorkspaceLock } from '../../lib/workspace/lock.js';
import { readMasterSecret } from '../../lib/workspace/master-secret.js';
import {
  FileTooLargeError,
  NotRegularFileError,
  openRegularFileForAppend,
  readRegularFile,
  SIZE_LIMITS,
} from '../../lib/workspace/regular-file.js';
import { readState } from '../../lib/workspace/state.js';
import { FileResourceJournal } from '../../lib/workspace/resource-journal.js';

describe('workspace/regular-file', () => {
  let dir: string;
  let target: string;
  const TARGET_TEXT = 'a file of the user that no link may reach\n';

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'regular-file-'));
    target = path.join(dir, 'elsewhere.txt');
    await fs.writeFile(target, TARGET_TEXT, { mode: 0o644 });
    await fs.chmod(target, 0o644);
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** The link target's content and mode are what beforeEach wrote. */
  async function assertTargetUntouched(): Promise<void> {
    assert.equal(await fs.readFile(target, 'utf8'), TARGET_TEXT);
    assert.equal((await fs.stat(target)).mode & 0o777, 0o644);
  }

  const refusedAs = (what: string, file: string, kind: string) => (err: Error) =>
    err instanceof NotRegularFileError && err.message.startsWith(`${what} ${file} is ${kind}, not a regular file`);

  it('refuses a planted debug-log link: nothing is appended to or chmod-ed on its target', async () => {
    const log = path.join(dir, 'constellation-debug.log');
    await fs.symlink(target, log);
    assert.throws(() => createDebugLog(log), refusedAs('The debug log', log, 'a symbolic link'));
    await assertTargetUntouched();
  });

  it('refuses a dangling debug-log link instead of creating its target', async () => {
    const log = path.join(dir, 'constellation-debug.log');
    const created = path.join(dir, 'would-be-created');
    await fs.symlink(created, log);
    assert.throws(() => createDebugLog(log), refusedAs('The debug log', log, 'a symbolic link'));
    await assert.rejects(fs.stat(created), /ENOENT/);
  });

  it('refuses links where the state file, the master secret, the lock and the journal are read', async () => {
    for (const name of [
      'constellation-state.yaml',
      'constellation-mastersecret.json',
      '.constellation.lock',
      'constellation-resources.json',
    ]) {
      await fs.symlink(target, path.join(dir, name));
    }
    await assert.rejects(
      readState(dir),
      refusedAs('The state file', path.join(dir, 'constellation-state.yaml'), 'a symbolic link'),
    );
    await assert.rejects(
      readMasterSecret(dir),
      refusedAs('The master secret', path.join(dir, 'constellation-mastersecret.json'), 'a symbolic link'),
    );
    await assert.rejects(
      acquireWorkspaceLock(dir, 'test'),
      refusedAs('The workspace lock', path.join(dir, '.constellation.lock'), 'a symbolic link'),
    );
    await assert.rejects(
      new FileResourceJournal(dir).list(),
      refusedAs('The resource journal', path.join(dir, 'constellation-resources.json'), 'a symbolic link'),
    );
    await assertTargetUntouched();
  });

  it('refuses to replace a link by an atomic write, leaving link and target as they were', async () => {
    const state = path.join(dir, 'constellation-state.yaml');
    await fs.symlink(target, state);
    await assert.rejects(
      writeFileAtomic(state, 'version: v1\n', { what: 'the state file' }),
      refusedAs('The state file', state, 'a symbolic link'),
    );
    assert.ok((await fs.lstat(state)).isSymbolicLink());
    await assertTargetUntouched();
    assert.deepEqual((await fs.readdir(dir)).sort(), ['constellation-state.yaml', 'elsewhere.txt']);
  });

  it('refuses a FIFO at once instead of blocking on it', async () => {
    const fifo = path.join(dir, 'constellation-conf.yaml');
    execFileSync('mkfifo', [fifo]);
    await assert.rejects(
      readRegularFile(fifo, { what: 'the config', maxBytes: 1024 }),
      refusedAs('The config', fifo, 'a FIFO'),
    );
    await assert.rejects(
      openRegularFileForAppend(fifo, { what: 'the node log', mode: 0o600 }),
      (err: Error) => err instanceof NotRegularFileError,
    );
  });

  it('refuses a directory where a file should be', async () => {
    const sub = path.join(dir, 'constellation-debug.log');
    await fs.mkdir(sub);
    assert.throws(() => createDebugLog(sub), refusedAs('The debug log', sub, 'a directory'));
  });

  it('refuses a file over its limit with its size and the limit, without reading it', async () => {
    const file = path.join(dir, 'constellation-state.yaml');
    await fs.writeFile(file, '');
    await fs.truncate(file, 200 * 1024 * 1024); // sparse: 200 MiB on paper, nothing on disk
    await assert.rejects(
      readState(dir),
      (err: Error) =>
        err instanceof FileTooLargeError && err.message === `The state file ${file} is 200 MiB; the limit is 1 MiB.`,
    );
  });

  it('reads a regular file within its limit, and appends to one', async () => {
    const file = path.join(dir, 'node.log');
    await fs.writeFile(file, 'first\n');
    const handle = await openRegularFileForAppend(file, { what: 'the node log', mode: 0o600 });
    await handle.write('second\n');
    await handle.close();
    assert.equal(
      (await readRegularFile(file, { what: 'the node log', maxBytes: SIZE_LIMITS.nodeFile })).toString(),
      'first\nsecond\n',
    );
    await assert.rejects(
      readRegularFile(file, { what: 'the node log', maxBytes: 8 }),
      /is 13 bytes; the limit is 8 bytes/,
    );
  });

  it('passes a missing file on as ENOENT, for the caller to decide what absence means', async () => {
    await assert.rejects(
      readRegularFile(path.join(dir, 'missing'), { what: 'x', maxBytes: 1 }),
      (err: NodeJS.ErrnoException) => err.code === 'ENOENT',
    );
  });
});
