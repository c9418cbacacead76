import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOCK_FILE } from '../../lib/workspace/files.js';
import { acquireWorkspaceLock, readWorkspaceLock, WorkspaceLockedError } from '../../lib/workspace/lock.js';

const HOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/hold-lock.ts');

describe('workspace/lock', () => {
  let dir: string;
  let children: ChildProcessWithoutNullStreams[] = [];

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ws-lock-'));
  });
  afterEach(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
        process.kill(child.pid, 'SIGKILL');
        await once(child, 'exit');
      }
    }
    children = [];
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Starts a process holding the lock; resolves once it has it. */
  async function startHolder(command: string): Promise<ChildProcessWithoutNullStreams> {
    const child = spawn(process.execPath, ['--import', 'tsx', HOLDER, dir, command], { stdio: 'pipe' });
    children.push(child);
    child.stdout.setEncoding('utf8');
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: string) => {
        out += d;
        if (out.includes('locked')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`lock holder exited with ${code}: ${err}`)));
    });
    return child;
  }

  it('takes and releases the lock; the file holds pid, command and time, mode 0600', async () => {
    const lock = await acquireWorkspaceLock(dir, 'create');
    const file = path.join(dir, LOCK_FILE);
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    const info = await readWorkspaceLock(dir);
    assert.equal(info?.pid, process.pid);
    assert.equal(info?.command, 'create');
    assert.ok(!Number.isNaN(Date.parse(info?.since ?? '')));
    await lock.release();
    await lock.release(); // idempotent
    assert.equal(await readWorkspaceLock(dir), undefined);
    assert.deepEqual(await fs.readdir(dir), []);
    await (await acquireWorkspaceLock(dir, 'init')).release();
  });

  it('a second command in another process gets an error naming the holder PID and command', async () => {
    const child = await startHolder('apply');
    await assert.rejects(acquireWorkspaceLock(dir, 'terminate'), (err: Error) => {
      assert.ok(err instanceof WorkspaceLockedError);
      assert.match(err.message, new RegExp(`"apply" \\(PID ${child.pid}\\b`));
      assert.match(err.hint ?? '', /\.constellation\.lock/);
      return true;
    });
    child.stdin.write('release\n');
    await once(child, 'exit');
    assert.equal(child.exitCode, 0);
    const lock = await acquireWorkspaceLock(dir, 'terminate');
    await lock.release();
  });

  it('takes over the lock of a killed process', async () => {
    const child = await startHolder('create');
    process.kill(child.pid!, 'SIGKILL');
    await once(child, 'exit');
    assert.equal((await readWorkspaceLock(dir))?.pid, child.pid, 'the killed process left its lock');
    const lock = await acquireWorkspaceLock(dir, 'terminate');
    assert.equal((await readWorkspaceLock(dir))?.pid, process.pid);
    await lock.release();
  });

  it('is removed when the holder exits without releasing', async () => {
    const child = await startHolder('create');
    child.stdin.write('exit\n');
    await once(child, 'exit');
    assert.equal(await readWorkspaceLock(dir), undefined);
  });

  it('refuses a second acquisition in the same process, and release leaves a foreign lock alone', async () => {
    const lock = await acquireWorkspaceLock(dir, 'create');
    await assert.rejects(acquireWorkspaceLock(dir, 'init'), new RegExp(`PID ${process.pid}`));
    // Someone replaced the lock file meanwhile: release must not delete theirs.
    const foreign = { pid: 1, command: 'other', since: new Date().toISOString(), host: os.hostname(), id: 'x' };
    await fs.writeFile(path.join(dir, LOCK_FILE), JSON.stringify(foreign));
    await lock.release();
    assert.equal((await readWorkspaceLock(dir))?.command, 'other');
  });

  it('treats a lock from another host as held', async () => {
    const foreign = { pid: 999999, command: 'create', since: new Date().toISOString(), host: 'elsewhere', id: 'x' };
    await fs.writeFile(path.join(dir, LOCK_FILE), JSON.stringify(foreign));
    await assert.rejects(acquireWorkspaceLock(dir, 'init', { isAlive: () => false }), /PID 999999 on elsewhere/);
  });

  it('refuses an unreadable lock file with a hint', async () => {
    await fs.writeFile(path.join(dir, LOCK_FILE), 'garbage');
    await assert.rejects(acquireWorkspaceLock(dir, 'init'), (err: Error & { hint?: string }) => {
      assert.match(err.message, /unreadable/);
      assert.match(err.hint ?? '', /delete the file/);
      return true;
    });
    assert.equal(await fs.readFile(path.join(dir, LOCK_FILE), 'utf8'), 'garbage');
  });

  it('two stale-lock takeovers at once leave exactly one holder', async () => {
    const stale = { pid: 999999, command: 'create', since: new Date().toISOString(), host: os.hostname(), id: 'stale' };
    await fs.writeFile(path.join(dir, LOCK_FILE), JSON.stringify(stale));
    const isAlive = (pid: number) => pid !== 999999;
    const results = await Promise.allSettled([
      acquireWorkspaceLock(dir, 'a', { isAlive }),
      acquireWorkspaceLock(dir, 'b', { isAlive }),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    assert.equal(won.length, 1);
    assert.ok(results.some((r) => r.status === 'rejected' && r.reason instanceof WorkspaceLockedError));
    await (won[0] as PromiseFulfilledResult<{ release(): Promise<void> }>).value.release();
  });
});
