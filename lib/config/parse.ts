/**
 * Reads constellation-conf.yaml: YAML (the `yaml` package, keeping source positions) checked against the zod
 * schema, every problem reported as a ConfigIssue with its key path and the line of the key in the file, in
 * words a user can act on rather than zod's defaults. A config is read as a regular file (no link followed) of
 * at most 1 MiB (SIZE_LIMITS.config): a generated one is a few KiB.
 */
import path from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import { yamlNestingProblem } from '../yaml-nesting.js';
import type { z } from 'zod';
import { UserError } from '../errors.js';
import { CONFIG_FILE } from '../workspace/files.js';
import { formatSize, readRegularFile, SIZE_LIMITS } from '../workspace/regular-file.js';
import { checkKeys, JsonInputError } from '../json.js';
import { ConfigError, type ConfigIssue } from './errors.js';
import { buildConfigSchema, configSchema, type Config, type ConfigSchemaOptions } from './schema.js';
import { knownKeysAt } from './schema-walk.js';

type Segment = string | number;

export type ParseOptions = ConfigSchemaOptions;

const lenientSchema = buildConfigSchema({ allowIncomplete: true });

/**
 * Configs this process parsed, by options, file name and text: one command reads the same config several times
 * (`mini up` six times: its edit, the provider, create and its edit, init), and each parse with its validation costs
 * ten milliseconds or more of CPU on the path to the nodes' start. Errors are not kept; every caller gets its own copy.
 */
const parsed = new Map<string, Config>();
const PARSED_KEPT = 8;

/** Parses and validates a config; throws ConfigError naming every problem. */
export function parseConfig(yamlText: string, fileName: string = CONFIG_FILE, options: ParseOptions = {}): Config {
  const key = `${options.allowIncomplete ? 'lenient' : 'strict'}\0${fileName}\0${yamlText}`;
  const known = parsed.get(key);
  if (known) return structuredClone(known);
  const config = parseUncached(yamlText, fileName, options);
  if (parsed.size >= PARSED_KEPT) parsed.delete(parsed.keys().next().value as string);
  parsed.set(key, structuredClone(config));
  return config;
}

function parseUncached(yamlText: string, fileName: string, options: ParseOptions): Config {
  const schema = options.allowIncomplete ? lenientSchema : configSchema;
  if (Buffer.byteLength(yamlText) > SIZE_LIMITS.config) {
    throw new ConfigError(fileName, [
      {
        path: '',
        line: 1,
        message: `the config is ${formatSize(Buffer.byteLength(yamlText))}; the limit is ${formatSize(SIZE_LIMITS.config)}`,
      },
    ]);
  }
  const tooDeep = yamlNestingProblem(yamlText);
  if (tooDeep)
    throw new ConfigError(fileName, [{ path: '', line: 1, message: `the config is not valid YAML: ${tooDeep}` }]);
  const lineCounter = new LineCounter();
  const doc = parseDocument(yamlText, { lineCounter, prettyErrors: false, uniqueKeys: true, logLevel: 'error' });
  const lineOf = (offset: number) => lineCounter.linePos(offset).line;

  if (doc.errors.length > 0) {
    throw new ConfigError(
      fileName,
      doc.errors.map((e) => ({
        path: '',
        line: lineOf(e.pos[0]),
        message: `not valid YAML: ${yamlMessage(e.message)}`,
      })),
      { hint: 'Fix the YAML syntax at the line named above (indentation, quotes, a missing colon).' },
    );
  }
  if (doc.contents === null) {
    throw new ConfigError(fileName, [{ path: '', line: 1, message: 'the file is empty' }], {
      hint: 'Write a new one with `constellation config generate <provider>` (move the empty file away first).',
    });
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
    checkKeys(data);
  } catch (err) {
    if (err instanceof JsonInputError)
      throw new ConfigError(fileName, [{ path: err.key ?? '', line: 1, message: 'a key of this name is not allowed' }]);
    throw new ConfigError(fileName, [{ path: '', line: 1, message: `cannot be read: ${(err as Error).message}` }]);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new ConfigError(fileName, [
      {
        path: '',
        line: lineOf(doc.contents.range?.[0] ?? 0),
        message: 'the top level must be a mapping of keys (version, name, provider, ...)',
      },
    ]);
  }

  const result = schema.safeParse(data, { error: friendlyMessage });
  if (result.success) return result.data;
  const issues = result.error.issues
    .flatMap((issue) => toConfigIssues(issue, schema))
    .map((issue) => ({ ...issue, line: locate(doc, issue.segments, lineOf) }))
    .sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  throw new ConfigError(
    fileName,
    dedupe(issues.map(({ segments, line, message }) => ({ path: formatPath(segments), line, message }))),
  );
}

export interface LoadOptions extends ParseOptions {
  /** File name in the workspace; constellation-conf.yaml by default. */
  fileName?: string;
  /** How messages name the file; its full path by default. */
  displayPath?: string;
}

/** Reads and validates `<workspaceDir>/constellation-conf.yaml`. */
export async function loadConfig(workspaceDir: string, options: LoadOptions = {}): Promise<Config> {
  const fileName = options.fileName ?? CONFIG_FILE;
  const file = path.join(workspaceDir, fileName);
  const displayPath = options.displayPath ?? file;
  let text: string;
  try {
    text = await readConfigText(file);
  } catch (err) {
    if (err instanceof UserError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new UserError(`There is no ${fileName} in ${workspaceDir}.`, {
        hint: 'Write one with `constellation config generate <local|aws|azure|gcp>`, or point -C at the workspace that has it.',
        cause: err,
      });
    }
    throw new UserError(`Cannot read ${displayPath}: ${(err as Error).message}`, { cause: err });
  }
  return parseConfig(text, displayPath, { allowIncomplete: options.allowIncomplete });
}

/** The text of a config file: a regular file (a link is refused, not followed) of at most SIZE_LIMITS.config. */
export async function readConfigText(file: string): Promise<string> {
  return (await readRegularFile(file, { what: 'the config', maxBytes: SIZE_LIMITS.config })).toString('utf8');
}

/** yaml's messages end with " at line L, column C" even without prettyErrors; we print the line ourselves. */
function yamlMessage(message: string): string {
  return message.replace(/ at line \d+, column \d+.*$/s, '').trim();
}

interface LocatedIssue {
  segments: Segment[];
  message: string;
}

function toConfigIssues(issue: z.core.$ZodIssue, schema: z.ZodType): LocatedIssue[] {
  const at = issue.path.filter((p): p is Segment => typeof p !== 'symbol');
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => ({
        segments: [...at, key],
        message: unknownKeyMessage(key, knownKeysAt(schema, at)),
      }));
    case 'invalid_key':
      return [{ segments: at, message: issue.issues.map((i) => i.message).join('; ') }];
    default:
      return [{ segments: at, message: issue.message }];
  }
}

function unknownKeyMessage(key: string, known: string[]): string {
  const suggestion = closest(key, known);
  const options = known.length > 0 ? `; known keys here: ${known.join(', ')}` : '';
  return `unknown key ${JSON.stringify(key)}${suggestion ? ` (did you mean ${JSON.stringify(suggestion)}?)` : options}`;
}

/** The known key within edit distance 2 (or equal ignoring case), if any. */
function closest(key: string, known: string[]): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = candidate.toLowerCase() === key.toLowerCase() ? 0 : editDistance(candidate, key);
    if (distance <= 2 && (!best || distance < best.distance)) best = { key: candidate, distance };
  }
  return best?.key;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** Zod's issues in the words of a YAML file (mapping, list, whole number). Schema-level messages take precedence. */
function friendlyMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type': {
      const expected = TYPE_WORDS[issue.expected] ?? issue.expected;
      if (issue.input === undefined) return `is missing: add it (${expected})`;
      return `must be ${expected}, not ${describeValue(issue.input)}`;
    }
    case 'too_small':
      if (issue.origin === 'string' && issue.minimum === 1) return 'must not be empty';
      if (issue.origin === 'number')
        return `must be ${issue.inclusive ? 'at least' : 'greater than'} ${issue.minimum}, not ${String(issue.input)}`;
      return undefined;
    case 'too_big':
      if (issue.origin === 'number') return `must be at most ${issue.maximum}, not ${String(issue.input)}`;
      if (issue.origin === 'string') return `must be at most ${issue.maximum} characters long`;
      return undefined;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, not ${describeValue(issue.input)}`;
    default:
      return undefined;
  }
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'a mapping of keys',
  record: 'a mapping of keys',
  array: 'a list',
};

function describeValue(value: unknown): string {
  if (value === null) return 'null (an empty value)';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
  return `${typeof value} ${String(value)}`;
}

/**
 * The line of the deepest key on `segments` that exists in the document: the key itself when it is there,
 * else (a missing key) the line of the mapping that should hold it.
 */
function locate(doc: Document, segments: Segment[], lineOf: (offset: number) => number): number {
  let node: unknown = doc.contents;
  let line = lineOf((doc.contents as Node | null)?.range?.[0] ?? 0);
  for (const segment of segments) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment));
      if (!pair) break;
      if (isScalar(pair.key) && pair.key.range) line = lineOf(pair.key.range[0]);
      node = pair.value;
    } else if (isSeq(node)) {
      const item = node.items[Number(segment)] as Node | undefined;
      if (!item?.range) break;
      line = lineOf(item.range[0]);
      node = item;
    } else {
      break;
    }
  }
  return line;
}

function formatPath(segments: Segment[]): string {
  return segments.reduce<string>((out, s) => (typeof s === 'number' ? `${out}[${s}]` : out ? `${out}.${s}` : s), '');
}

function dedupe(issues: ConfigIssue[]): ConfigIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const key = `${i.line}|${i.path}|${i.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
