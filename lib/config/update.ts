/**
 * Changes keys of an existing config in place, keeping the user's comments and layout (the `yaml` document
 * model), for `iam create <cloud> --update-config`. The result is validated before it is written, so an update
 * never leaves a config that fails to parse; fields still empty (e.g. `image`) are allowed.
 */
import path from 'node:path';
import { isMap, isScalar, parseDocument } from 'yaml';
import { UserError } from '../errors.js';
import { writeFileAtomic } from '../workspace/atomic-file.js';
import { CONFIG_FILE } from '../workspace/files.js';
import { parseConfig, readConfigText } from './parse.js';
import type { Config } from './schema.js';

/** Sets `provider.<the config's provider>.<key>` for each update; returns the new YAML text. */
export function setProviderFields(yamlText: string, updates: Record<string, unknown>, fileName: string = CONFIG_FILE): string {
  parseConfig(yamlText, fileName, { allowIncomplete: true });
  const doc = parseDocument(yamlText);
  const providers = doc.get('provider');
  const provider = isMap(providers) && isScalar(providers.items[0]?.key) ? String(providers.items[0].key.value) : undefined;
  if (!provider) throw new UserError(`${fileName} has no provider section to update.`);
  for (const [key, value] of Object.entries(updates)) doc.setIn(['provider', provider, key], doc.createNode(value));
  const text = doc.toString({ lineWidth: 0 });
  parseConfig(text, fileName, { allowIncomplete: true });
  return text;
}

/** Applies setProviderFields to the workspace's config file (atomic write) and returns the updated config. */
export async function updateConfigProviderFields(workspaceDir: string, updates: Record<string, unknown>): Promise<Config> {
  const file = path.join(workspaceDir, CONFIG_FILE);
  const text = setProviderFields(await readConfigText(file), updates, file);
  await writeFileAtomic(file, text, { what: 'the config' });
  return parseConfig(text, file, { allowIncomplete: true });
}
