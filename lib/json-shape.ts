/**
 * Hand checks of small JSON shapes, for the modules the node program loads before it listens: the boot config
 * (bootstrapper/boot-config.ts) and the attestation document (lib/atls/document.ts). Under TCG a VM's first
 * Node.js compiles everything the entry imports statically before any of it runs, and zod was a third of that
 * (docs/workflows/node-images.md, "The node program's start in the VM"); these shapes are a few fields each.
 *
 * The first issue found reads like zod's (path and message), because the modules' errors quote it:
 * test/json-shape.test.ts checks each shape against the zod schema it replaced, input by input. Like zod, a field
 * check comes before unknown keys, fields are checked in the shape's order, and a plain object passes a record
 * check. Values are what JSON.parse makes; nothing else is told apart.
 */

/** A string field; `min` is the shortest length it may have. */
export interface StringField {
  kind: 'string';
  min?: number;
  optional?: boolean;
}

/** A JSON object with any keys and values (zod's `z.record(z.string(), z.unknown())`). */
export interface RecordField {
  kind: 'record';
  optional?: boolean;
}

/** A JSON object with these fields; `strict` refuses other keys, otherwise they are dropped. */
export interface ObjectField {
  kind: 'object';
  fields: Readonly<Record<string, Field>>;
  strict: boolean;
  optional?: boolean;
}

export type Field = StringField | RecordField | ObjectField;

/** The first thing wrong with a value: where (keys from the top, empty for the value itself) and what. */
export interface ShapeIssue {
  path: string[];
  message: string;
}

export type ShapeResult = { success: true; data: unknown } | { success: false; issue: ShapeIssue };

/** Checks `value` against `shape`; the data holds the shape's fields only (a strict shape has no others). */
export function checkShape(value: unknown, shape: ObjectField): ShapeResult {
  const result = check(value, shape, []);
  return 'issue' in result ? { success: false, issue: result.issue } : { success: true, data: result.data };
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function invalid(path: string[], expected: string, value: unknown): { issue: ShapeIssue } {
  return { issue: { path, message: `Invalid input: expected ${expected}, received ${typeName(value)}` } };
}

function check(value: unknown, field: Field, path: string[]): { data: unknown } | { issue: ShapeIssue } {
  switch (field.kind) {
    case 'string':
      if (typeof value !== 'string') return invalid(path, 'string', value);
      if (field.min !== undefined && value.length < field.min) {
        return { issue: { path, message: `Too small: expected string to have >=${field.min} characters` } };
      }
      return { data: value };
    case 'record':
      return isPlainObject(value) ? { data: { ...value } } : invalid(path, 'record', value);
    case 'object': {
      if (!isPlainObject(value)) return invalid(path, 'object', value);
      const data: Record<string, unknown> = {};
      for (const [key, sub] of Object.entries(field.fields)) {
        const present = Object.hasOwn(value, key) && value[key] !== undefined;
        if (!present && sub.optional) continue;
        const result = check(value[key], sub, [...path, key]);
        if ('issue' in result) return result;
        data[key] = result.data;
      }
      if (field.strict) {
        const unknown = Object.keys(value).filter((key) => !Object.hasOwn(field.fields, key));
        if (unknown.length > 0) {
          const keys = unknown.map((key) => JSON.stringify(key)).join(', ');
          return { issue: { path, message: `Unrecognized key${unknown.length > 1 ? 's' : ''}: ${keys}` } };
        }
      }
      return { data };
    }
  }
}
