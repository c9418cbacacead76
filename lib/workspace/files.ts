/** The workspace's file names (docs/architecture.md#workspace-files), compatible with Constellation where Constellation names them. */
import { promises as fs } from 'node:fs';

export const CONFIG_FILE = 'constellation-conf.yaml';
export const STATE_FILE = 'constellation-state.yaml';
export const MASTER_SECRET_FILE = 'constellation-mastersecret.json';
export const ADMIN_CONF_FILE = 'constellation-admin.conf';
/** How the CLI reaches the cluster store (admin credentials, written at init; secret). */
export const STORE_CREDENTIALS_FILE = 'constellation-store.json';
export const DEBUG_LOG_FILE = 'constellation-debug.log';
/** The failing node's log after an unsuccessful `init`. */
export const CLUSTER_LOG_FILE = 'constellation-cluster.log';
/** What providers made (ResourceJournal), so a re-run continues and `terminate` deletes exactly that. */
export const RESOURCES_FILE = 'constellation-resources.json';
/** The journal of `upgrade apply`: every step before and after it happens, so a killed run continues (no secret). */
export const UPGRADE_JOURNAL_FILE = 'constellation-upgrade.json';
/** Present while a command changes the workspace; holds the owner's PID. */
export const LOCK_FILE = '.constellation.lock';

/** Whether something (a file, a directory, a dangling symlink) is at `file`; other errors than ENOENT are thrown. */
export async function pathExists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
