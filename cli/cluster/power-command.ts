/** The shared body of `mini reboot`, `mini stop` and `mini start`: one library call under the workspace lock, one line out. */
import type { PowerAction } from './mini.js';

export async function runPowerCommand(
  workspaceDir: string,
  action: PowerAction,
  selection: { nodes: string[]; controlPlanes?: boolean },
  log: (line: string) => void,
): Promise<{ nodes: string[] }> {
  const [{ withWorkspaceSession }, { miniPower }] = await Promise.all([import('./session.js'), import('./mini.js')]);
  const result = await withWorkspaceSession(workspaceDir, `mini ${action}`, ({ journal, log: debugLog }) =>
    miniPower({ workspaceDir, journal, log: debugLog, action, ...selection, progress: (m) => debugLog.debug(m) }),
  );
  const done = { reboot: 'Rebooted', stop: 'Stopped', start: 'Started' }[action];
  log(`${done} ${result.nodes.join(', ')}.`);
  return result;
}
