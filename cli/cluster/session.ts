/**
 * A workspace session: what every command that changes a workspace holds while it runs — the workspace lock (one
 * command at a time), the debug log (constellation-debug.log, every run at debug level, secrets redacted) and the
 * resource journal. `withWorkspaceSession` logs the command's start, end or error and always releases the lock.
 * Read-only commands (status) use `withDebugLog` only: they take no lock, so they work while another command runs.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ResourceJournal } from '../../providers/contract.js';
import { UserError } from '../../lib/errors.js';
import { createDebugLog, type Logger } from '../../lib/logging/index.js';
import { DEBUG_LOG_FILE } from '../../lib/workspace/files.js';
import { acquireWorkspaceLock } from '../../lib/workspace/lock.js';
import { FileResourceJournal } from '../../lib/workspace/resource-journal.js';

export interface WorkspaceSession {
  workspaceDir: string;
  log: Logger;
  journal: ResourceJournal;
}

/** Runs `fn` with the debug log open (no lock); the log records the command and how it ended. */
export async function withDebugLog<T>(workspaceDir: string, command: string, fn: (log: Logger) => Promise<T>): Promise<T> {
  await requireDirectory(workspaceDir);
  const debugLog = createDebugLog(path.join(workspaceDir, DEBUG_LOG_FILE));
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
    await debugLog.close();
  }
}

/** Runs `fn` holding the workspace lock, with the debug log and the resource journal of the workspace. */
export async function withWorkspaceSession<T>(workspaceDir: string, command: string, fn: (session: WorkspaceSession) => Promise<T>): Promise<T> {
  await requireDirectory(workspaceDir);
  const lock = await acquireWorkspaceLock(workspaceDir, command);
  try {
    return await withDebugLog(workspaceDir, command, (log) => fn({ workspaceDir, log, journal: new FileResourceJournal(workspaceDir) }));
  } finally {
    await lock.release();
  }
}

/** The workspace must exist (mini up makes it; every other command runs in one). */
async function requireDirectory(dir: string): Promise<void> {
  let stat;
  try {
    stat = await fs.stat(dir);
  } catch {
    throw new UserError(`The workspace directory ${dir} does not exist.`, { hint: 'Create it, or name an existing one with -C <dir>.' });
  }
  if (!stat.isDirectory()) throw new UserError(`The workspace ${dir} is not a directory.`, { hint: 'Name a directory with -C <dir>.' });
}
