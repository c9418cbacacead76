/**
 * A workspace session: what every command that changes a workspace holds while it runs — the workspace lock (one
 * command at a time), the debug log (constellation-debug.log, every run at debug level, secrets redacted) and the
 * resource journal. `withWorkspaceSession` logs the command's start, end or error and always releases the lock.
 * The debug log is kept only in a folder that is a workspace: see openDebugLog.
 * Read-only commands (status) use `withDebugLog` only: they take no lock, so they work while another command runs.
 */
import { closeSync, existsSync, fchmodSync, fsyncSync, promises as fs, writeSync } from 'node:fs';
import path from 'node:path';
import type { ResourceJournal } from '../../providers/contract.js';
import { UserError } from '../../lib/errors.js';
import { createLogger, type Logger } from '../../lib/logging/index.js';
import { checkWorkspaceAccess } from '../../lib/workspace/access.js';
import {
  CONFIG_FILE,
  DEBUG_LOG_FILE,
  MASTER_SECRET_FILE,
  RESOURCES_FILE,
  STATE_FILE,
} from '../../lib/workspace/files.js';
import { acquireWorkspaceLock } from '../../lib/workspace/lock.js';
import { openRegularFileForAppendSync } from '../../lib/workspace/regular-file.js';
import { FileResourceJournal } from '../../lib/workspace/resource-journal.js';

export interface WorkspaceSession {
  workspaceDir: string;
  log: Logger;
  journal: ResourceJournal;
}

/** Runs `fn` with the debug log open (no lock); the log records the command and how it ended. */
export async function withDebugLog<T>(
  workspaceDir: string,
  command: string,
  fn: (log: Logger) => Promise<T>,
): Promise<T> {
  await requireDirectory(workspaceDir);
  const debugLog = openDebugLog(workspaceDir);
  const log = debugLog.child({ command, pid: process.pid });
  log.debug('command started');
  try {
    const result = await fn(log);
    log.debug('command finished');
    return result;
  } catch (err) {
    log.error('command failed', { error: (err as Error).message, name: (err as Error).name });
    throw err;
  } finally {
    debugLog.close();
  }
}

/**
 * Runs `fn` holding the workspace lock, with the debug log and the resource journal of the workspace. The folder
 * is checked first (writable; as root, root's with every file in it: lib/workspace/access.ts).
 */
export async function withWorkspaceSession<T>(
  workspaceDir: string,
  command: string,
  fn: (session: WorkspaceSession) => Promise<T>,
): Promise<T> {
  await checkWorkspaceAccess(workspaceDir);
  const lock = await acquireWorkspaceLock(workspaceDir, command);
  try {
    return await withDebugLog(workspaceDir, command, (log) =>
      fn({ workspaceDir, log, journal: new FileResourceJournal(workspaceDir) }),
    );
  } finally {
    await lock.release();
  }
}

/** The workspace must exist (mini up makes it; every other command runs in one). */
async function requireDirectory(dir: string): Promise<void> {
  let stat;
  try {
    stat = await fs.stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EACCES') {
      throw new UserError(`The workspace ${dir} cannot be looked at: permission denied.`, {
        hint: 'Use a folder you own (-C <dir>), or run the command as a user who may read it and its parent folders.',
      });
    }
    throw new UserError(`The workspace directory ${dir} does not exist.`, {
      hint: 'Create it, or name an existing one with -C <dir>.',
    });
  }
  if (!stat.isDirectory())
    throw new UserError(`The workspace ${dir} is not a directory.`, { hint: 'Name a directory with -C <dir>.' });
}

/** Files that make a folder a workspace: a debug log is kept only in one (a debug log of earlier runs counts too). */
const WORKSPACE_FILES = [CONFIG_FILE, STATE_FILE, MASTER_SECRET_FILE, RESOURCES_FILE, DEBUG_LOG_FILE];

const isWorkspace = (dir: string) => WORKSPACE_FILES.some((name) => existsSync(path.join(dir, name)));

/**
 * The workspace's debug log (constellation-debug.log, lib/logging). In a folder that is no workspace yet, lines wait
 * in memory until a workspace file appears (mini up and config generate write theirs) and are dropped if none does,
 * so a command run outside a workspace leaves nothing behind. A log that cannot be opened (a workspace this user
 * may only read) is skipped: a read-only command still runs, and a writing one was refused before.
 */
function openDebugLog(workspaceDir: string): Logger & { close(): void } {
  const file = path.join(workspaceDir, DEBUG_LOG_FILE);
  let fd: number | undefined;
  let pending: string[] | undefined = [];
  let closed = false;
  const open = () => {
    const lines = pending ?? [];
    pending = undefined;
    try {
      fd = openRegularFileForAppendSync(file, { what: 'the debug log', mode: 0o600 });
      fchmodSync(fd, 0o600);
      for (const line of lines) writeSync(fd, `${line}\n`);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') throw err;
    }
  };
  const logger = createLogger((line) => {
    if (closed) return;
    if (pending) {
      pending.push(line);
      if (isWorkspace(workspaceDir)) open();
      return;
    }
    if (fd !== undefined) writeSync(fd, `${line}\n`);
  });
  return {
    ...logger,
    close() {
      if (closed) return;
      if (pending && isWorkspace(workspaceDir)) open();
      closed = true;
      if (fd === undefined) return;
      fsyncSync(fd);
      closeSync(fd);
      fd = undefined;
    },
  };
}
