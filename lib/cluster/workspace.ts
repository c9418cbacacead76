/** Small workspace helpers the cluster commands share: file existence, the state of a workspace that may have none. */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { emptyState, readState, statePath, type State } from '../workspace/state.js';

/** What to do when a workspace cannot continue. */
export const TERMINATE_HINT = 'Run `constellation terminate` to remove what this workspace created, then start again; or use a new workspace (-C <dir>).';

export async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch {
    return false;
  }
}

/** The state file, or an empty one when the workspace has none yet (a config written by hand, or none at all). */
export async function readStateOrEmpty(workspaceDir: string): Promise<State> {
  return (await exists(statePath(workspaceDir))) ? readState(workspaceDir) : emptyState();
}

/** " -C <dir>" for a command line the user is told to run, or "" when the workspace is the current directory. */
export function workspaceArg(workspaceDir: string): string {
  if (path.resolve(workspaceDir) === process.cwd()) return '';
  const word = /^[\w./@%+=:,-]+$/.test(workspaceDir) ? workspaceDir : `'${workspaceDir.replace(/'/g, `'\\''`)}'`;
  return ` -C ${word}`;
}
