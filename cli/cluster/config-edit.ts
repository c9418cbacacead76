/**
 * Changes the workspace's config in place where the cluster commands must: `mini up` sets the node counts of its
 * flags, and `create` on the local provider writes the measurements of the node image it boots (PCRs 4, 9, 11 are
 * only known once the image is). Edits go through the `yaml` document model so the user's comments and layout stay,
 * and the result is validated before it is written atomically: an edit never leaves a config that fails to load.
 * lib/config offers only provider-field updates (`setProviderFields`), hence this small editor for the other keys.
 */
import path from 'node:path';
import { isMap, isScalar, parseDocument, type Document, type YAMLMap } from 'yaml';
import type { Measurements } from '../../lib/attestation/types.js';
import { parseConfig, readConfigText, VARIANT_CONFIG_KEY_LIST, type Config } from '../../lib/config/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';

export interface ConfigEdits {
  /** initialCount by node-group name. */
  initialCounts?: Record<string, number>;
  /** PCRs to set in the attestation variant's measurements (others stay as they are). */
  measurements?: Measurements;
}

/** Applies the edits when they change anything; returns the config as written (or as it was). */
export async function editConfig(workspaceDir: string, edits: ConfigEdits): Promise<Config> {
  const file = path.join(workspaceDir, CONFIG_FILE);
  const text = await readConfigText(file);
  const before = parseConfig(text, file);
  const doc = parseDocument(text);
  for (const [group, count] of Object.entries(edits.initialCounts ?? {})) doc.setIn(['nodeGroups', group, 'initialCount'], count);
  if (edits.measurements) setMeasurements(doc, edits.measurements);
  const next = doc.toString({ lineWidth: 0 });
  const after = parseConfig(next, file);
  if (JSON.stringify(after) === JSON.stringify(before)) return before;
  await writeFileAtomic(file, next, { what: 'the config' });
  return after;
}

/** Sets PCR entries of the one attestation section, matching keys written as numbers (`4:`) or strings (`"4":`). */
function setMeasurements(doc: Document, measurements: Measurements): void {
  const attestation = doc.get('attestation', true) as YAMLMap | undefined;
  const variantKey = VARIANT_CONFIG_KEY_LIST.find((k) => attestation?.has(k));
  const map = variantKey ? doc.getIn(['attestation', variantKey, 'measurements'], true) : undefined;
  if (!isMap(map)) return; // parseConfig has already refused such a config
  for (const [index, m] of Object.entries(measurements)) {
    const value = doc.createNode({ expected: m.expected, warnOnly: m.warnOnly });
    const pair = map.items.find((item) => isScalar(item.key) && String(item.key.value) === index);
    if (pair) pair.value = value;
    else map.add(doc.createPair(Number(index), value));
  }
  const keyOf = (item: (typeof map.items)[number]) => (isScalar(item.key) ? Number(item.key.value) : 0);
  map.items.sort((a, b) => keyOf(a) - keyOf(b));
}
