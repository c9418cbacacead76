import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { withWorkspaceSession } from '../../cli/cluster/session.js';
import { acquireWorkspaceLock } from '../../lib/workspace/lock.js';
import { CONFIG_FILE, DEBUG_LOG_FILE, LOCK_FILE } from '../../lib/workspace/files.js';
import { tempDir } from './support/workspace.js';

describe('withWorkspaceSession', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await tempDir();
    await fs.writeFile(path.join(ws, CONFIG_FILE), 'version: v1\n'); // a workspace: it keeps a debug log
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  it('holds the workspace lock while it runs, logs start and end, and releases the lock', async () => {
    await withWorkspaceSession(ws, 'create', async ({ log }) => {
      await assert.rejects(acquireWorkspaceLock(ws, 'init'), /in use by another constellation command: "create"/);
      log.info('working', { initSecret: 'abcdef' });
    });
    await assert.rejects(fs.access(path.join(ws, LOCK_FILE)));
    const lines = (await fs.readFile(path.join(ws, DEBUG_LOG_FILE), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => l.msg),
      ['command started', 'working', 'command finished'],
    );
    assert.equal(lines[1].command, 'create');
    assert.notEqual(lines[1].initSecret, 'abcdef', 'secrets are redacted');
  });

  it('leaves no debug log in a folder that is no workspace', async () => {
    await fs.rm(path.join(ws, CONFIG_FILE));
    await withWorkspaceSession(ws, 'terminate', async ({ log }) => log.info('nothing here'));
    assert.deepEqual(await fs.readdir(ws), []);
  });

  it('keeps every line, the earlier ones too, once the command makes the folder a workspace', async () => {
    await fs.rm(path.join(ws, CONFIG_FILE));
    await withWorkspaceSession(ws, 'mini up', async ({ log }) => {
      log.info('before the config');
      await fs.writeFile(path.join(ws, CONFIG_FILE), 'version: v1\n');
      log.info('after the config');
    });
    const lines = (await fs.readFile(path.join(ws, DEBUG_LOG_FILE), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    assert.deepEqual(lines, ['command started', 'before the config', 'after the config', 'command finished']);
  });

  it('logs the error and releases the lock when the command fails', async () => {
    await assert.rejects(
      withWorkspaceSession(ws, 'init', async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    const log = await fs.readFile(path.join(ws, DEBUG_LOG_FILE), 'utf8');
    assert.match(log, /"msg":"command failed".*"error":"boom"/);
    await (await acquireWorkspaceLock(ws, 'again')).release();
  });

  it('refuses a workspace directory that does not exist', async () => {
    await assert.rejects(
      withWorkspaceSession(path.join(ws, 'missing'), 'create', async () => undefined),
      /does not exist/,
    );
  });
});
