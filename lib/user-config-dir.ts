/**
 * The per-user folder of the CLI (not of a workspace): $XDG_CONFIG_HOME/constellation, else ~/.config/constellation.
 * It holds what belongs to the person rather than to one cluster: the local provider's versioned images and the key
 * that signs their measurements.
 */
import os from 'node:os';
import path from 'node:path';

export function userConfigDir(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string {
  const xdg = env.XDG_CONFIG_HOME;
  // The XDG base-directory spec ignores relative paths.
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.config');
  return path.join(base, 'constellation');
}
