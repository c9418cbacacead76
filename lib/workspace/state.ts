/**
 * constellation-state.yaml (Constellation's state file, `version: v1`): what `create` learned about the
 * infrastructure and what `init` made (clusterID, measurement salt). Validated with zod; errors name the
 * file, the key path and the YAML line. infrastructure.initSecret is a secret: no message quotes a value.
 */
import path from 'node:path';
import { LineCounter, parseDocument, stringify, isMap, isPair, isScalar, isSeq, type Document } from 'yaml';
import { yamlNestingProblem } from '../yaml-nesting.js';
import { z } from 'zod';
import { UserError } from '../errors.js';
import { writeFileAtomic } from './atomic-file.js';
import { pathExists, STATE_FILE } from './files.js';
import { formatSize, SIZE_LIMITS } from './regular-file.js';
import { checkKeys, JsonInputError } from '../json.js';
import { readRequiredFile } from './required-file.js';

export const STATE_VERSION = 'v1';

/** Hex bytes, or empty while not known yet (Constellation's HexBytes). */
const hex = () =>
  z.string().regex(/^(?:[0-9a-fA-F]{2})*$/, { error: 'must be hex bytes (an even number of 0-9, a-f)' });
const providerSection = () => z.record(z.string(), z.unknown()).optional();

export const infrastructureSchema = z.strictObject({
  uid: z.string(),
  clusterEndpoint: z.string(),
  inClusterEndpoint: z.string(),
  /** Secret: the plain init secret (the nodes hold only its bcrypt hash). */
  initSecret: hex(),
  apiServerCertSANs: z.array(z.string()),
  name: z.string(),
  ipCidrNode: z.string().optional(),
  azure: providerSection(),
  gcp: providerSection(),
  aws: providerSection(),
  local: providerSection(),
  qemu: providerSection(),
});

export const clusterValuesSchema = z.strictObject({
  clusterID: hex(),
  ownerID: hex().optional(),
  measurementSalt: hex(),
});

export const stateSchema = z.strictObject({
  version: z.literal(STATE_VERSION, { error: `must be "${STATE_VERSION}"` }),
  infrastructure: infrastructureSchema,
  clusterValues: clusterValuesSchema,
});

export type State = z.infer<typeof stateSchema>;
export type Infrastructure = State['infrastructure'];
export type ClusterValues = State['clusterValues'];

export function statePath(workspaceDir: string): string {
  return path.join(workspaceDir, STATE_FILE);
}

/** A state with every field present and empty: what `create` starts from. */
export function emptyState(): State {
  return {
    version: STATE_VERSION,
    infrastructure: {
      uid: '',
      clusterEndpoint: '',
      inClusterEndpoint: '',
      initSecret: '',
      apiServerCertSANs: [],
      name: '',
    },
    clusterValues: { clusterID: '', measurementSalt: '' },
  };
}

/** The state file, or an empty one when the workspace has none yet (a config written by hand, or none at all). */
export async function readStateOrEmpty(workspaceDir: string): Promise<State> {
  return (await pathExists(statePath(workspaceDir))) ? readState(workspaceDir) : emptyState();
}

export async function readState(workspaceDir: string): Promise<State> {
  const file = statePath(workspaceDir);
  const text = await readRequiredFile(
    file,
    'the state file',
    'Run `constellation create` first, or run the command in the workspace of this cluster (-C <dir>).',
    SIZE_LIMITS.state,
  );
  return parseState(text.toString('utf8'), file);
}

/** Parses and validates the file's content; `file` only names it in messages. */
export function parseState(text: string, file: string = STATE_FILE): State {
  const size = Buffer.byteLength(text);
  if (size > SIZE_LIMITS.state) {
    throw new UserError(
      `The state file ${file} is ${formatSize(size)}; the limit is ${formatSize(SIZE_LIMITS.state)}.`,
      { hint: STATE_HINT },
    );
  }
  const tooDeep = yamlNestingProblem(text);
  if (tooDeep) throw new UserError(`The state file ${file} is not valid YAML: ${tooDeep}.`, { hint: STATE_HINT });
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, logLevel: 'error' });
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    const line = lineCounter.linePos(first.pos[0]).line;
    // The YAML library's message can quote the document; only its kind and line are reported.
    throw new UserError(
      `The state file ${file} is not valid YAML (line ${line}: ${first.code.toLowerCase().replaceAll('_', ' ')}).`,
      {
        hint: STATE_HINT,
      },
    );
  }
  scalarsAsWritten(doc);
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
    checkKeys(data);
  } catch (err) {
    // An alias bomb, or a reserved key (lib/json.ts): neither is in a file constellation wrote.
    const why = err instanceof JsonInputError ? err.message : 'cannot be read as plain values (too many aliases)';
    throw new UserError(`The state file ${file} ${why}.`, { hint: STATE_HINT });
  }
  if (data === null || data === undefined)
    throw new UserError(`The state file ${file} is empty.`, { hint: STATE_HINT });
  const result = stateSchema.safeParse(data);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => describeIssue(issue, doc, lineCounter));
  throw new UserError(`The state file ${file} is invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
    hint: STATE_HINT,
  });
}

const STATE_HINT = 'The state file is written by constellation; restore it from your backup or fix the named keys.';

export function stateToYaml(state: State): string {
  // Validate so nothing invalid is ever written; the key order follows Constellation's.
  const valid = stateSchema.parse(state);
  return stringify(valid, { lineWidth: 0 });
}

/** Writes the state atomically (mode 0600); `exclusive` refuses to replace an existing file. */
export async function writeState(
  workspaceDir: string,
  state: State,
  options: { exclusive?: boolean } = {},
): Promise<void> {
  await writeFileAtomic(statePath(workspaceDir), stateToYaml(state), {
    exclusive: options.exclusive,
    mode: 0o600,
    what: 'the state file',
  });
}

/** Read-modify-write of the state file; `update` returns the new state (it may change its argument). */
export async function updateState(workspaceDir: string, update: (state: State) => State | void): Promise<State> {
  const current = await readState(workspaceDir);
  const next = update(current) ?? current;
  await writeState(workspaceDir, next);
  return next;
}

function describeIssue(issue: z.core.$ZodIssue, doc: Document, lineCounter: LineCounter): string {
  const keyPath = issue.path.map(String);
  let where = keyPath.join('.') || '(top level)';
  let message = issue.message;
  let offset = nodeOffset(doc, keyPath);
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys;
    where = keys.map((k) => [...keyPath, k].join('.')).join(', ');
    message = keys.length === 1 ? 'unknown key' : 'unknown keys';
    offset = keyOffset(doc, keyPath, keys[0]) ?? offset;
  } else if (issue.code === 'invalid_type' && !doc.hasIn(keyPath)) {
    // A missing key has no node: point at the key of the section it belongs in.
    const section = keyPath.slice(0, -1);
    offset = section.length === 0 ? undefined : keyOffset(doc, section.slice(0, -1), section[section.length - 1]);
    message = offset === undefined ? 'missing' : `missing from the section at line ${lineCounter.linePos(offset).line}`;
    offset = undefined;
  }
  const line = offset === undefined ? '' : ` (line ${lineCounter.linePos(offset).line})`;
  return `${where}: ${message}${line}`;
}

/**
 * Like Go's YAML decoder into string fields, reads plain scalars of our string fields as written:
 * an unquoted hex value such as 1234 or 1e10 stays the string "1234", not a number.
 * Provider sections are free-form and keep YAML's types.
 */
function scalarsAsWritten(doc: Document): void {
  const asWritten = (node: unknown) => {
    if (isScalar(node) && node.value !== null && typeof node.value !== 'string' && node.source !== undefined) {
      node.value = node.source;
    }
  };
  if (!isMap(doc.contents)) return;
  for (const top of doc.contents.items) {
    if (!isScalar(top.key)) continue;
    if (top.key.value === 'version') asWritten(top.value);
    if ((top.key.value !== 'infrastructure' && top.key.value !== 'clusterValues') || !isMap(top.value)) continue;
    for (const field of top.value.items) {
      if (!isScalar(field.key) || PROVIDER_SECTIONS.has(String(field.key.value))) continue;
      if (isSeq(field.value)) field.value.items.forEach(asWritten);
      else asWritten(field.value);
    }
  }
}

const PROVIDER_SECTIONS = new Set(['azure', 'gcp', 'aws', 'local', 'qemu']);

function nodeOffset(doc: Document, keyPath: string[]): number | undefined {
  const node = keyPath.length === 0 ? doc.contents : doc.getIn(keyPath, true);
  const range = (node as { range?: [number, number, number] } | undefined)?.range;
  return range?.[0];
}

function keyOffset(doc: Document, parentPath: string[], key: string): number | undefined {
  const parent = parentPath.length === 0 ? doc.contents : doc.getIn(parentPath, true);
  if (!isMap(parent)) return undefined;
  for (const item of parent.items) {
    if (isPair(item) && isScalar(item.key) && String(item.key.value) === key) return item.key.range?.[0];
  }
  return undefined;
}
