/**
 * The errors the operating system gives for a file the CLI cannot use (permission denied, read-only file system,
 * disk full), turned into messages that name the file, the cause and the fix instead of "This is a bug". The
 * workspace checks (lib/workspace/access.ts) catch most of these before a command starts; this is the net for the
 * rest (e.g. `config generate` in a folder the user may not write to).
 */
import { readFileSync } from 'node:fs';
import { UserError } from '../lib/errors.js';

const VERBS: Record<string, string> = {
  open: 'open',
  mkdir: 'create the folder',
  rename: 'replace',
  unlink: 'remove',
  rmdir: 'remove the folder',
  lstat: 'look at',
  stat: 'look at',
  scandir: 'list',
  link: 'create',
  chmod: 'change the mode of',
  access: 'access',
};

/** A UserError for a file-system error of the operating system; undefined for any other error. */
export function explainSystemError(err: unknown): UserError | undefined {
  const e = err as NodeJS.ErrnoException;
  if (!(err instanceof Error) || typeof e.code !== 'string' || typeof e.syscall !== 'string') return undefined;
  const target = e.path ? ` ${e.path}` : '';
  const verb = VERBS[e.syscall] ?? e.syscall;
  switch (e.code) {
    case 'EACCES':
    case 'EPERM':
      return new UserError(`Permission denied: cannot ${verb}${target} (you are ${currentUser()}).`, {
        hint: 'Use a workspace folder you own (-C <dir>), or run the command as a user who may write there (the local provider needs root: sudo).',
        cause: err,
      });
    case 'EROFS':
      return new UserError(`Cannot ${verb}${target}: the file system is read-only.`, {
        hint: 'Use a workspace folder on a writable file system (-C <dir>).',
        cause: err,
      });
    case 'ENOSPC':
    case 'EDQUOT':
      return new UserError(`Cannot ${verb}${target}: no space left on the device (or quota exceeded).`, {
        hint: 'Free some space, or use a workspace folder on another file system (-C <dir>).',
        cause: err,
      });
    default:
      return undefined;
  }
}

function currentUser(): string {
  const uid = process.geteuid?.() ?? -1;
  if (uid === 0) return 'root';
  try {
    const name = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields[2] === String(uid))?.[0];
    if (name) return `${name}, uid ${uid}`;
  } catch {
    // the number alone
  }
  return `uid ${uid}`;
}
