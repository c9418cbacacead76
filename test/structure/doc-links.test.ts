/**
 * References into docs/ cannot rot: every `docs/<page>.md#<anchor>` a source file, test, script or README cites names
 * a page that exists and, with an anchor, a heading of that page (GitHub's anchors); every relative link between the
 * Markdown pages does too; and no file cites the team's out-of-tree design document by section number any more: the design
 * is docs/design.md.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../support/cli.js';
import { anchorsOf } from './support/markdown.js';

const SKIP = new Set(['node_modules', 'dist', '.git', 'testdata', 'gen']);
const SOURCE = /\.(ts|mts|mjs|cjs|js|proto|sh|json|yaml|md)$/;

/** Repository-relative paths of the tracked kinds of text file, below `dir`. */
function files(dir = ''): string[] {
  return readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) return SKIP.has(entry.name) || entry.name.startsWith('.') ? [] : files(rel);
    return SOURCE.test(entry.name) && entry.name !== 'package-lock.json' ? [rel] : [];
  });
}

const anchors = new Map<string, Set<string>>();
/** Why `page` (repository-relative) with `anchor` is no target, or undefined when it is one. */
function broken(page: string, anchor: string | undefined): string | undefined {
  if (!existsSync(path.join(REPO_ROOT, page))) return `${page} does not exist`;
  if (!anchor || !page.endsWith('.md')) return undefined;
  if (!anchors.has(page)) anchors.set(page, anchorsOf(path.join(REPO_ROOT, page)));
  return anchors.get(page)!.has(anchor) ? undefined : `${page} has no heading #${anchor}`;
}

describe('structure: references into docs/', function () {
  const all = files();

  it('reads the tree', function () {
    assert.ok(all.includes('lib/poll.ts') && all.includes('docs/design.md'), `${all.length} files`);
  });

  it('cites the design by docs/design.md, not by a section number of a document outside the repository', function () {
    const marker = ['DESIGN', '§'].join(' ');
    const citing = all.filter((f) => readFileSync(path.join(REPO_ROOT, f), 'utf8').includes(marker));
    assert.deepEqual(citing, []);
  });

  it('cites only pages and sections of docs/ that exist', function () {
    const problems: string[] = [];
    for (const file of all) {
      const lines = readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        // A path written from the repository root (docs/<page>.md); in docs/ itself pages link relatively (below).
        for (const m of line.matchAll(/(?<![\w./-])docs\/([\w./-]*[\w-])\.(md|json)(?:#([\w-]+))?/g)) {
          const why = broken(`docs/${m[1]}.${m[2]}`, m[3]);
          if (why) problems.push(`${file}:${i + 1}: ${why}`);
        }
      });
    }
    assert.deepEqual(problems, []);
  });

  it('links between Markdown pages only to pages and sections that exist', function () {
    const problems: string[] = [];
    for (const file of all.filter((f) => f.endsWith('.md'))) {
      const text = readFileSync(path.join(REPO_ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
        const [page, anchor] = target.split('#');
        const resolved = page === '' ? file : path.normalize(path.join(path.dirname(file), page));
        const why = broken(resolved, anchor);
        if (why) problems.push(`${file}: (${target}): ${why}`);
      }
    }
    assert.deepEqual(problems, []);
  });
});
