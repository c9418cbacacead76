/** What the cluster commands tell a user to run next: the shared hint, and the workspace argument of a command line. */
import path from 'node:path';

/** What to do when a workspace cannot continue. */
export const TERMINATE_HINT =
  'Run `constellation terminate` to remove what this workspace created, then start again; or use a new workspace (-C <dir>).';

/** " -C <dir>" for a command line the user is told to run, or "" when the workspace is the current directory. */
export function workspaceArg(workspaceDir: string): string {
  if (path.resolve(workspaceDir) === process.cwd()) return '';
  const word = /^[\w./@%+=:,-]+$/.test(workspaceDir) ? workspaceDir : `'${workspaceDir.replace(/'/g, `'\\''`)}'`;
  return ` -C ${word}`;
}
