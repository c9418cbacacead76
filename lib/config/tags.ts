/** Parses `-t/--tags` values: `key=value`, repeated or comma-separated (`-t team=infra,env=dev`). */
import { UserError } from '../errors.js';

export function parseTags(values: readonly string[]): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const item of values.flatMap((v) => v.split(','))) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) {
      throw new UserError(`The tag "${item}" is not of the form key=value.`, {
        hint: 'Pass tags as -t key=value (repeat -t, or separate them with commas).',
      });
    }
    tags[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
  }
  return tags;
}
