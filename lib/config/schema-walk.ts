/**
 * Finds the zod schema at a key path of the config schema, for what zod's issues do not carry: the keys an object
 * knows (for "did you mean") and a key's description (for the comments of a generated config).
 */
import { z } from 'zod';

type Segment = string | number;

function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  while (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodNullable)
    s = s.unwrap() as z.ZodType;
  return s;
}

/** The schema of the value at `path`, or undefined where the path leaves the schema. */
export function schemaAt(root: z.ZodType, path: readonly Segment[]): z.ZodType | undefined {
  let s: z.ZodType | undefined = root;
  for (const segment of path) {
    const inner: z.ZodType = unwrap(s);
    if (inner instanceof z.ZodObject) {
      s =
        (inner.shape as Record<string, z.ZodType>)[String(segment)] ??
        (inner._zod.def.catchall as z.ZodType | undefined);
    } else if (inner instanceof z.ZodRecord) {
      s = inner.valueType as z.ZodType;
    } else if (inner instanceof z.ZodArray) {
      s = inner.element as z.ZodType;
    } else {
      return undefined;
    }
    if (!s) return undefined;
  }
  return s;
}

/** The keys the object at `path` defines (empty when it is not an object with fixed keys). */
export function knownKeysAt(root: z.ZodType, path: readonly Segment[]): string[] {
  const s = schemaAt(root, path);
  const inner = s && unwrap(s);
  return inner instanceof z.ZodObject ? Object.keys(inner.shape) : [];
}

/** The description of the key at `path` (of the optional/default wrapper, else of what it wraps). */
export function descriptionAt(root: z.ZodType, path: readonly Segment[]): string | undefined {
  const s = schemaAt(root, path);
  return s && (s.description ?? unwrap(s).description);
}
