/**
 * The tables in docs/ that list what the code defines are read against the code itself, so a new node state, init
 * progress step, workspace file or cluster-store entry cannot ship without its row (and a row for something the code
 * no longer has fails too). The lists come from the code's own constants: bootstrapper/node-status.ts NODE_STATES,
 * bootstrapper/init-server.ts INIT_STEPS, every exported `*_FILE` name of lib/workspace/, lib/cluster-store/codec.ts
 * ENTRY.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { INIT_STEPS } from '../../bootstrapper/init-server.js';
import { NODE_STATES } from '../../bootstrapper/node-status.js';
import { ENTRY } from '../../lib/cluster-store/codec.js';
import { REPO_ROOT } from '../support/cli.js';
import { firstColumn, section } from './support/markdown.js';

/** The first column of the tables under `heading` in `page` (docs/-relative), in order. */
function tableRows(page: string, heading: RegExp): string[] {
  const lines = section(readFileSync(path.join(REPO_ROOT, 'docs', page), 'utf8'), heading);
  assert.ok(lines.length > 0, `docs/${page} has no heading matching ${heading}`);
  return firstColumn(lines);
}

/** What is in `code` and not in `rows`, and what is in `rows` and not in `code`. */
function compare(code: readonly string[], rows: string[]): { missingRows: string[]; rowsWithoutCode: string[] } {
  return { missingRows: code.filter((c) => !rows.includes(c)), rowsWithoutCode: rows.filter((r) => !code.includes(r)) };
}

/** Every exported `*_FILE` string constant of the modules in lib/workspace/: the workspace's file names. */
async function workspaceFiles(): Promise<string[]> {
  const dir = path.join(REPO_ROOT, 'lib/workspace');
  const names = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod))
      if (/_FILE$/.test(name) && typeof value === 'string') names.add(value);
  }
  return [...names];
}

describe('structure: docs tables that list what the code defines', function () {
  it('docs/bootstrapper.md "States" has one row per node state (NODE_STATES)', function () {
    assert.deepEqual(compare(NODE_STATES, tableRows('bootstrapper.md', /^States$/)), {
      missingRows: [],
      rowsWithoutCode: [],
    });
  });

  it('docs/bootstrapper.md "Progress steps" has one row per init step, in order (INIT_STEPS)', function () {
    assert.deepEqual(tableRows('bootstrapper.md', /^Progress steps$/), [...INIT_STEPS]);
  });

  it('docs/architecture.md "Workspace files" has one row per workspace file constant of lib/workspace/', async function () {
    const files = await workspaceFiles();
    assert.ok(files.includes('constellation-conf.yaml') && files.includes('.constellation.lock'), files.join(', '));
    assert.deepEqual(compare(files, tableRows('architecture.md', /^Workspace files$/)), {
      missingRows: [],
      rowsWithoutCode: [],
    });
  });

  it('docs/workflows/workspace.md "Files" has one row per workspace file constant of lib/workspace/', async function () {
    assert.deepEqual(compare(await workspaceFiles(), tableRows('workflows/workspace.md', /^Files$/)), {
      missingRows: [],
      rowsWithoutCode: [],
    });
  });

  it('docs/join-service.md lists every cluster-store entry (lib/cluster-store/codec.ts ENTRY)', function () {
    const entries = Object.values(ENTRY).map((e) =>
      typeof e === 'string' ? e : e(e === ENTRY.disk ? '<uuid>' : '<name>'),
    );
    const rows = tableRows('join-service.md', /^Where the configuration lives/).filter((r) => /^[a-z]+\//.test(r));
    assert.deepEqual(compare(entries, rows), { missingRows: [], rowsWithoutCode: [] });
  });
});
