/**
 * JSON (and YAML turned into plain values) from outside, before a zod schema sees it. zod's object and record
 * checks read `value.constructor.prototype`, so a mapping with the key "constructor" set to null makes them
 * throw a TypeError instead of reporting an issue; such a document arrived from anyone who can open a join
 * stream. No format of ours has a key named "constructor" or "__proto__", so a value holding one is refused
 * here as malformed, with the key's path, and never reaches a schema.
 */

const RESERVED_KEYS = new Set(['constructor', '__proto__', 'prototype']);

/**
 * JSON.parse's failure, or a reserved key. `message` completes "<the input> ...": "is not valid JSON" or
 * 'has the key "a.constructor", which is not allowed'; it never quotes the input beyond the key's path.
 */
export class JsonInputError extends SyntaxError {
  constructor(readonly key?: string) {
    super(key === undefined ? 'is not valid JSON' : `has the key "${key}", which is not allowed`);
  }
}

/** Parses JSON text; throws JsonInputError when it is not JSON or holds a reserved key. */
export function parseJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the input (which may be a secret): say only what failed.
    throw new JsonInputError();
  }
  checkKeys(value);
  return value;
}

/** Throws JsonInputError when a mapping anywhere in `value` has a reserved key. Iterative: no depth limit to hit. */
export function checkKeys(value: unknown): void {
  const stack: Array<{ value: unknown; path: string }> = [{ value, path: '' }];
  while (stack.length > 0) {
    const { value: current, path } = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    if (Array.isArray(current)) {
      current.forEach((item, i) => stack.push({ value: item, path: `${path}[${i}]` }));
      continue;
    }
    for (const key of Object.keys(current)) {
      const at = path ? `${path}.${key}` : key;
      if (RESERVED_KEYS.has(key)) throw new JsonInputError(at);
      stack.push({ value: (current as Record<string, unknown>)[key], path: at });
    }
  }
}
