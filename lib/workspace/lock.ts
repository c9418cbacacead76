/**
 * The workspace lock: while a command changes a workspace it holds .constellation.lock, created
 * exclusively (link(2), so it appears complete or not at all) with {pid, command, since, host, id}.
 * A second command gets a UserError naming the holder's PID and command. A lock whose holder process
 * is gone (same host, PID not alive) is stale and taken over. The lock is removed on release and, as a
 * last resort, when the process exits; a killed process leaves a stale lock, which the next run takes over.
 * Hand-written: the lockfile packages on npm are not installed here and none stores the holder's command.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs, lstatSync, readFileSync, unlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../errors.js';
import { FileExistsError, writeFileAtomic } from './atomic-file.js';
import { LOCK_FILE } from './files.js';
import { readRegularFile, SIZE_LIMITS } from './regular-file.js';
import { processIsAlive } from '../process.js';

export { processIsAlive };

export interface LockInfo {
  pid: number;
  command: string;
  /** ISO time the lock was taken. */
  since: string;
  host: string;
  /** Random id of this acquisition, so release never removes someone else's lock. */
  id: string;
}

export interface WorkspaceLock {
  release(): Promise<void>;
}

export class WorkspaceLockedError extends UserError {
  constructor(
    readonly file: string,
    readonly holder: LockInfo,
  ) {
    super(
      `The workspace is in use by another constellation command: "${holder.command}" (PID ${holder.pid}${holder.host === os.hostname() ? '' : ` on ${holder.host}`}, since ${holder.since}).`,
      {
        hint: `Wait for it to finish. If no such process is running any more, delete ${file} and run the command again.`,
      },
    );
  }
}

export interface LockOptions {
  /** Whether a process is alive; a parameter for tests. */
  isAlive?: (pid: number) => boolean;
  now?: () => Date;
}

const MAX_ATTEMPTS = 5;

export async function acquireWorkspaceLock(
  workspaceDir: string,
  command: string,
  options: LockOptions = {},
): Promise<WorkspaceLock> {
  const isAlive = options.isAlive ?? processIsAlive;
  const file = path.join(workspaceDir, LOCK_FILE);
  const info: LockInfo = {
    pid: process.pid,
    command,
    since: (options.now?.() ?? new Date()).toISOString(),
    host: os.hostname(),
    id: randomBytes(8).toString('hex'),
  };
  const content = `${JSON.stringify(info)}\n`;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    try {
      await writeFileAtomic(file, content, { exclusive: true, mode: 0o600, what: 'the workspace lock' });
      return holdLock(file, info);
    } catch (err) {
      if (!(err instanceof FileExistsError)) throw err;
    }
    const holder = await readLockInfo(file);
    if (holder === 'gone') continue; // released between our attempt and the read: try again
    if (holder === 'unreadable') {
      throw new UserError(`The workspace lock ${file} is unreadable.`, {
        hint: 'If no other constellation command is running in this workspace, delete the file and run the command again.',
      });
    }
    if (holder.host !== os.hostname() || isAlive(holder.pid)) throw new WorkspaceLockedError(file, holder);
    await removeStaleLock(file, holder);
  }
  throw new UserError(`Could not take the workspace lock ${file}: other commands keep taking it.`, {
    hint: 'Run one constellation command at a time in a workspace.',
  });
}

/** The current holder of a workspace's lock, or undefined when it is free. */
export async function readWorkspaceLock(workspaceDir: string): Promise<LockInfo | undefined> {
  const holder = await readLockInfo(path.join(workspaceDir, LOCK_FILE));
  return typeof holder === 'string' ? undefined : holder;
}

function holdLock(file: string, info: LockInfo): WorkspaceLock {
  let held = true;
  // Last resort for commands that exit without releasing (process.exit, an uncaught error).
  const onExit = () => {
    if (held && ownsLockSync(file, info)) {
      try {
        unlinkSync(file);
      } catch {
        // nothing left to do while exiting
      }
    }
  };
  process.once('exit', onExit);
  return {
    async release() {
      if (!held) return;
      held = false;
      process.removeListener('exit', onExit);
      const current = await readLockInfo(file);
      if (typeof current !== 'string' && sameLock(current, info)) await fs.rm(file, { force: true });
    },
  };
}

/**
 * Removes a stale lock without racing another process that takes it over at the same time: the file is
 * moved aside first (atomic), then checked. If what was moved is not the stale lock (someone else's fresh
 * one), it is put back.
 */
async function removeStaleLock(file: string, stale: LockInfo): Promise<void> {
  const aside = `${file}.${randomBytes(6).toString('hex')}.stale`;
  try {
    await fs.rename(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const moved = await readLockInfo(aside);
  if (typeof moved !== 'string' && !sameLock(moved, stale)) {
    await fs.link(aside, file).catch(() => {});
  }
  await fs.rm(aside, { force: true });
}

async function readLockInfo(file: string): Promise<LockInfo | 'gone' | 'unreadable'> {
  let text: string;
  try {
    text = (await readRegularFile(file, { what: 'the workspace lock', maxBytes: SIZE_LIMITS.lockFile })).toString(
      'utf8',
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
  return parseLockInfo(text) ?? 'unreadable';
}

function sameLock(a: LockInfo, b: LockInfo): boolean {
  return a.id === b.id && a.pid === b.pid && a.since === b.since && a.host === b.host;
}

function ownsLockSync(file: string, info: LockInfo): boolean {
  try {
    if (!lstatSync(file).isFile()) return false;
    const current = parseLockInfo(readFileSync(file, 'utf8'));
    return current !== undefined && sameLock(current, info);
  } catch {
    return false;
  }
}

function parseLockInfo(text: string): LockInfo | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockInfo>;
    if (typeof value.pid !== 'number' || !Number.isInteger(value.pid) || value.pid <= 0) return undefined;
    return {
      pid: value.pid,
      command: typeof value.command === 'string' ? value.command : 'unknown command',
      since: typeof value.since === 'string' ? value.since : 'unknown time',
      host: typeof value.host === 'string' ? value.host : os.hostname(),
      id: typeof value.id === 'string' ? value.id : '',
    };
  } catch {
    return undefined;
  }
}
