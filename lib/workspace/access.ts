/**
 * Whether this process may use a folder as its workspace, asked before a command writes anything to it
 * (docs/getting-started.md, "Where the workspace can be"):
 *
 *   - the folder is a directory, or does not exist yet and its nearest existing parent is one we may write to
 *     (mini up makes it);
 *   - we may write to it (a read-only mount, or another user's folder without write permission, is refused with its
 *     owner named);
 *   - as root: the folder and every file in it (and in constellation-local/) belong to root. A folder another user
 *     owns lets that user swap the files root writes there (the master secret, the state), and files a non-root
 *     run left behind would be used by root as they are: both are refused, with the commands that fix it.
 *
 * Reads only (stat/lstat, access, readdir): nothing is created, so a refusal leaves no trace.
 */
import { constants, promises as fs, readFileSync, type Stats } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.js';

/** The one subfolder whose entries are checked too: the local provider's cluster folder (providers/local/layout.ts). */
const CHECKED_SUBFOLDERS = ['constellation-local'];

export interface WorkspaceAccessOptions {
  /** Whose access counts; default this process's effective uid. */
  uid?: number;
  /** The folder may be missing (it is made by the command): then its nearest existing parent must be writable. */
  mayCreate?: boolean;
}

export class WorkspaceAccessError extends UserError {}

/** Refuses (WorkspaceAccessError) a workspace this process must not or cannot write to; see the header. */
export async function checkWorkspaceAccess(workspaceDir: string, options: WorkspaceAccessOptions = {}): Promise<void> {
  const dir = path.resolve(workspaceDir);
  const uid = options.uid ?? process.geteuid?.() ?? -1;
  const stat = await statOrUndefined(dir);
  if (!stat) {
    if (!options.mayCreate) {
      throw new WorkspaceAccessError(`The workspace directory ${dir} does not exist.`, {
        hint: 'Create it, or name an existing one with -C <dir>.',
      });
    }
    const parent = await nearestExisting(path.dirname(dir));
    await requireWritable(
      parent,
      await fs.stat(parent),
      `The workspace ${dir} cannot be made: its parent folder ${parent}`,
    );
    return;
  }
  if (!stat.isDirectory())
    throw new WorkspaceAccessError(`The workspace ${dir} is not a directory.`, {
      hint: 'Name a directory with -C <dir>.',
    });
  await requireWritable(dir, stat, `The workspace ${dir}`);
  if (uid !== 0) return;

  const foreign: { file: string; owner: number }[] = [];
  if (stat.uid !== 0) foreign.push({ file: dir, owner: stat.uid });
  for (const folder of [dir, ...CHECKED_SUBFOLDERS.map((name) => path.join(dir, name))]) {
    for (const name of await fs.readdir(folder).catch(() => [] as string[])) {
      const file = path.join(folder, name);
      const entry = await lstatOrUndefined(file);
      if (entry && entry.uid !== 0) foreign.push({ file, owner: entry.uid });
    }
  }
  if (foreign.length === 0) return;
  const shown = foreign.slice(0, 5).map((f) => `  ${f.file} (owner: ${userName(f.owner)})`);
  if (foreign.length > shown.length) shown.push(`  … and ${foreign.length - shown.length} more`);
  throw new WorkspaceAccessError(
    `As root, constellation writes secrets only into a workspace that root owns, but these belong to another user:\n${shown.join('\n')}`,
    {
      hint:
        stat.uid !== 0
          ? `Use a folder of root's (e.g. -C /root/${path.basename(dir)}), or give this one to root first: chown -R root:root ${dir}`
          : `These were left by a run as another user. If they are yours to trust, give them to root (chown -R root:root ${dir}); otherwise remove them, or use a new folder (-C <dir>).`,
    },
  );
}

async function requireWritable(dir: string, stat: Stats, what: string): Promise<void> {
  try {
    await fs.access(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EROFS') {
      throw new WorkspaceAccessError(`${what} is on a read-only file system.`, {
        hint: 'Use a folder on a writable file system (-C <dir>).',
      });
    }
    const me = userName(process.geteuid?.() ?? -1);
    throw new WorkspaceAccessError(
      `${what} is not writable by you (${me}); it belongs to ${userName(stat.uid)} (mode ${(stat.mode & 0o7777).toString(8)}).`,
      {
        hint: `Use a folder you own (-C <dir>, e.g. -C ~/${path.basename(dir)}), or run the command as a user who may write there (the local provider needs root: sudo).`,
        cause: err,
      },
    );
  }
}

async function nearestExisting(dir: string): Promise<string> {
  for (let current = dir; ; current = path.dirname(current)) {
    if (await statOrUndefined(current)) return current;
    if (path.dirname(current) === current) return current;
  }
}

async function statOrUndefined(file: string): Promise<Stats | undefined> {
  try {
    return await fs.stat(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    if (code === 'EACCES') {
      throw new WorkspaceAccessError(
        `${file} cannot be looked at: permission denied (you are ${userName(process.geteuid?.() ?? -1)}).`,
        {
          hint: 'Use a folder you own (-C <dir>), or run the command as a user who may read its parent folders.',
          cause: err,
        },
      );
    }
    throw err;
  }
}

async function lstatOrUndefined(file: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(file);
  } catch {
    return undefined;
  }
}

/** "alice, uid 1000" from /etc/passwd, or "uid 1000" for a uid without an entry. */
function userName(uid: number): string {
  if (uid === 0) return 'root';
  let name: string | undefined;
  try {
    name = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields[2] === String(uid))?.[0];
  } catch {
    // no passwd file: the number alone
  }
  return name ? `${name}, uid ${uid}` : `uid ${uid}`;
}
