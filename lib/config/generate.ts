/**
 * `config generate`: writes a fresh workspace's constellation-conf.yaml and the empty constellation-state.yaml.
 * A file that exists is never overwritten: if either exists, neither is written; both writes are exclusive
 * (link(2)), so a concurrent writer cannot slip in between the check and the write either.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.js';
import { writeFileAtomic } from '../workspace/atomic-file.js';
import { CONFIG_FILE, pathExists, STATE_FILE } from '../workspace/files.js';
import { emptyState, writeState } from '../workspace/state.js';
import { defaultConfig, type DefaultConfigOptions } from './defaults.js';
import { parseConfig, type ParseOptions } from './parse.js';
import { renderConfig, type RenderOptions } from './render.js';
import type { Config } from './schema.js';

export interface GeneratedFiles {
  config: Config;
  configFile: string;
  stateFile: string;
}

export async function generateConfigFiles(
  workspaceDir: string,
  provider: string,
  options: DefaultConfigOptions & RenderOptions & { validate?: ParseOptions } = {},
): Promise<GeneratedFiles> {
  const config = defaultConfig(provider, options);
  const text = renderConfig(config, options);
  const configFile = path.join(workspaceDir, CONFIG_FILE);
  // Options a user chose (node counts, image) are checked like any config before anything is written; the parse is
  // kept (./parse.ts), so the command's next read of the file costs nothing.
  if (options.validate) parseConfig(text, configFile, options.validate);
  const stateFile = path.join(workspaceDir, STATE_FILE);
  const existing = (
    await Promise.all([configFile, stateFile].map(async (f) => ((await pathExists(f)) ? f : undefined)))
  ).filter((f): f is string => f !== undefined);
  if (existing.length > 0) {
    throw new UserError(
      `${existing.map((f) => path.basename(f)).join(' and ')} already ${existing.length === 1 ? 'exists' : 'exist'} in ${workspaceDir}; nothing was written.`,
      {
        hint: 'config generate never overwrites a workspace file. Move the file away if you really want a new config, or use another workspace (-C <dir>).',
      },
    );
  }
  await writeFileAtomic(configFile, text, { exclusive: true, what: 'the config' });
  try {
    await writeState(workspaceDir, emptyState(), { exclusive: true });
  } catch (err) {
    // Leave the workspace as it was: the config we just made goes again.
    await fs.rm(configFile, { force: true });
    throw err;
  }
  return { config, configFile, stateFile };
}
