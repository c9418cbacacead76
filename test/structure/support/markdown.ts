/**
 * Reading the repository's Markdown the way GitHub renders it, for the structure tests that keep docs and code in
 * step: heading anchors (GitHub's slugs), the links of a page, and the rows of a table under a heading.
 */
import { readFileSync } from 'node:fs';

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens; repeats get -1, -2, …. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]
      .toLowerCase()
      .replace(/<[^>]*>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export function anchorsOf(file: string): Set<string> {
  return headingAnchors(readFileSync(file, 'utf8'));
}

/** The lines of the section under the first heading whose text matches `heading` (to the next heading of its level or above). */
export function section(markdown: string, heading: RegExp): string[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => /^#{1,6}\s/.test(l) && heading.test(l.replace(/^#+\s*/, '')));
  if (start < 0) return [];
  const level = /^#+/.exec(lines[start])![0].length;
  const end = lines.findIndex((l, i) => i > start && new RegExp(`^#{1,${level}}\\s`).test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

/** The first cell of every body row (not the header) of the tables in `lines`, without backticks ("`waiting`" -> "waiting"). */
export function firstColumn(lines: string[]): string[] {
  const cells: string[] = [];
  let row = 0;
  for (const line of lines) {
    if (!line.trimStart().startsWith('|')) {
      row = 0;
      continue;
    }
    if (row++ < 2) continue; // the header and the separator
    cells.push(line.split('|')[1].trim().replace(/`/g, ''));
  }
  return cells;
}
