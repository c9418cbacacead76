/**
 * Changes the workspace's config in place where commands must: `mini up` sets the node counts and image of its
 * flags, `create` on the local provider writes the measurements of the node image it boots (PCRs 4, 9, 11 are only
 * known once the image is), and `config fetch-measurements` / `upgrade check --update-config` write an image's
 * signed measurements (replacing the whole set: the signed file names every PCR the image defines), and
 * `iam create <cloud> --update-config` sets the provider section's identity fields. The one module that edits a
 * config: edits go through the `yaml` document model so the user's comments and layout stay, and the result is
 * validated before it is written atomically: an edit never leaves a config that fails to load.
 */
import path from 'node:path';
import { isMap, isScalar, parseDocument, type Document, type YAMLMap } from 'yaml';
import type { Measurements } from '../attestation/types.js';
import { UserError } from '../errors.js';
import { writeFileAtomic } from '../workspace/atomic-file.js';
import { CONFIG_FILE } from '../workspace/files.js';
import { parseConfig, readConfigText } from './parse.js';
import type { Config } from './schema.js';
import { VARIANT_CONFIG_KEY_LIST } from './variants.js';

export interface ConfigEdits {
  /** initialCount by node-group name. */
  initialCounts?: Record<string, number>;
  /** The node image (`image`). */
  image?: string;
  /** PCRs to set in the attestation variant's measurements (others stay as they are, unless replaceMeasurements). */
  measurements?: Measurements;
  /** Remove the PCRs that `measurements` does not name: it is the whole set (an image's signed measurements). */
  replaceMeasurements?: boolean;
  /** Keys to set in the provider's section (`provider.<the config's provider>.<key>`). */
  providerFields?: Record<string, unknown>;
  /** Accept a config that still has empty fields (a cloud config before `iam create`, without an image yet). */
  allowIncomplete?: boolean;
}

/** Applies the edits when they change anything; returns the config as written (or as it was). */
export async function editConfig(workspaceDir: string, edits: ConfigEdits): Promise<Config> {
  const file = path.join(workspaceDir, CONFIG_FILE);
  const { before, after, text } = applyConfigEdits(await readConfigText(file), edits, file);
  if (JSON.stringify(after) === JSON.stringify(before)) return before;
  await writeFileAtomic(file, text, { what: 'the config' });
  return after;
}

/** The edits applied to a config's text: the config before and after, and the new text (both validated). */
export function applyConfigEdits(
  text: string,
  edits: ConfigEdits,
  file: string = CONFIG_FILE,
): { before: Config; after: Config; text: string } {
  const parseOptions = { allowIncomplete: edits.allowIncomplete ?? false };
  const before = parseConfig(text, file, parseOptions);
  const doc = parseDocument(text);
  if (edits.providerFields) setProviderSection(doc, edits.providerFields, file);
  for (const [group, count] of Object.entries(edits.initialCounts ?? {}))
    doc.setIn(['nodeGroups', group, 'initialCount'], count);
  if (edits.image !== undefined) {
    // Changing the scalar in place keeps a comment written after the value.
    const node = doc.get('image', true);
    if (isScalar(node)) node.value = edits.image;
    else doc.set('image', edits.image);
  }
  if (edits.measurements) setMeasurements(doc, edits.measurements, edits.replaceMeasurements ?? false);
  const next = doc.toString({ lineWidth: 0 });
  return { before, after: parseConfig(next, file, parseOptions), text: next };
}

/** Sets `provider.<the config's provider>.<key>` for each update; returns the new YAML text (`iam create`). */
export function setProviderFields(
  yamlText: string,
  updates: Record<string, unknown>,
  fileName: string = CONFIG_FILE,
): string {
  return applyConfigEdits(yamlText, { providerFields: updates, allowIncomplete: true }, fileName).text;
}

/** Sets provider fields in the workspace's config file (atomic write) and returns the updated config. */
export function updateConfigProviderFields(workspaceDir: string, updates: Record<string, unknown>): Promise<Config> {
  return editConfig(workspaceDir, { providerFields: updates, allowIncomplete: true });
}

function setProviderSection(doc: Document, updates: Record<string, unknown>, file: string): void {
  const providers = doc.get('provider');
  const provider =
    isMap(providers) && isScalar(providers.items[0]?.key) ? String(providers.items[0].key.value) : undefined;
  if (!provider) throw new UserError(`${file} has no provider section to update.`);
  for (const [key, value] of Object.entries(updates)) doc.setIn(['provider', provider, key], doc.createNode(value));
}

/**
 * Sets PCR entries of the one attestation section, matching keys written as numbers (`4:`) or strings (`"4":`); with
 * `replace`, entries of other PCRs go. A replaced entry keeps the comment on its key (the PCR's meaning).
 */
function setMeasurements(doc: Document, measurements: Measurements, replace: boolean): void {
  const attestation = doc.get('attestation', true) as YAMLMap | undefined;
  const variantKey = VARIANT_CONFIG_KEY_LIST.find((k) => attestation?.has(k));
  const map = variantKey ? doc.getIn(['attestation', variantKey, 'measurements'], true) : undefined;
  if (!isMap(map)) return; // parseConfig has already refused such a config
  if (replace)
    map.items = map.items.filter((item) => isScalar(item.key) && Object.hasOwn(measurements, String(item.key.value)));
  for (const [index, m] of Object.entries(measurements)) {
    const value = doc.createNode({ expected: m.expected, warnOnly: m.warnOnly });
    const pair = map.items.find((item) => isScalar(item.key) && String(item.key.value) === index);
    if (pair) pair.value = value;
    else map.add(doc.createPair(Number(index), value));
  }
  const keyOf = (item: (typeof map.items)[number]) => (isScalar(item.key) ? Number(item.key.value) : 0);
  map.items.sort((a, b) => keyOf(a) - keyOf(b));
}
