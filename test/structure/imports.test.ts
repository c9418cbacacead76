/**
 * The import graph of the source tree (docs/architecture.md, "Commands depend on libraries, never the other way
 * round"): every import of every module (static, `export … from`, `import type`, and `import('…')` with a literal
 * path), parsed with the TypeScript compiler's pre-processor. The graph has
 *  - no circle between modules;
 *  - no circle between areas. lib/, providers/ and cli/ are collections: each folder or module directly in them
 *    is an area (lib/attestation, lib/errors.ts, providers/aws, providers/common, cli/cluster, cli/confirm.ts).
 *    bootstrapper/, joinservice/ and proto/ are one component each, one area with their folders. Folders inside
 *    an area (lib/attestation/variants, bootstrapper/kubernetes) belong to it: they may use the area's modules
 *    while it loads them;
 *  - no import from lib/ into cli/, providers/, bootstrapper/ or joinservice/: lib/ is the floor.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from '../support/cli.js';

const SOURCE_FOLDERS = ['cli', 'lib', 'providers', 'bootstrapper', 'joinservice', 'proto'];
const ABOVE_LIB = /^(cli|providers|bootstrapper|joinservice)\//;

/** Module (repository-relative path) -> the modules it imports. */
type Graph = Map<string, Set<string>>;

describe('structure: the import graph', function () {
  const graph = importGraph(REPO_ROOT, SOURCE_FOLDERS);

  it('reads the whole source tree', function () {
    assert.ok(graph.size > 200, `${graph.size} modules`);
    assert.ok(graph.get('cli/commands/create.ts')?.has('cli/base-command.ts'), 'static imports are edges');
    assert.ok(
      graph.get('lib/attestation/variant-table.ts')?.has('lib/attestation/variants/local-vtpm.ts'),
      'literal dynamic imports are edges',
    );
  });

  it('has no circle between modules', function () {
    assert.deepEqual(circles(graph), []);
  });

  it('has no circle between areas', function () {
    assert.deepEqual(circles(collapse(graph, areaOf)), []);
  });

  it('has no import from lib/ into cli/, providers/, bootstrapper/ or joinservice/', function () {
    assert.deepEqual(upwardImports(graph), []);
  });

  it('finds a planted circle and a planted upward import (so the checks above can fail)', function () {
    const planted: Graph = new Map([
      ['lib/a/x.ts', new Set(['lib/b/y.ts'])],
      ['lib/b/y.ts', new Set(['lib/b/z.ts'])],
      ['lib/b/z.ts', new Set(['lib/a/w.ts', 'providers/aws/index.ts'])],
      ['lib/a/w.ts', new Set<string>()],
    ]);
    assert.deepEqual(circles(planted), []);
    assert.deepEqual(circles(collapse(planted, areaOf)), [['lib/a', 'lib/b']]);
    assert.deepEqual(upwardImports(planted), ['lib/b/z.ts -> providers/aws/index.ts']);
    planted.get('lib/a/w.ts')!.add('lib/a/x.ts');
    assert.deepEqual(circles(planted), [['lib/a/w.ts', 'lib/a/x.ts', 'lib/b/y.ts', 'lib/b/z.ts']]);
  });
});

function importGraph(root: string, folders: string[]): Graph {
  const graph: Graph = new Map();
  const files = folders.flatMap((folder) => sourceFiles(root, folder));
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true);
    const targets = new Set<string>();
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue; // packages and node: builtins
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName)).replace(/\.js$/, '.ts');
      assert.ok(existsSync(path.join(root, target)), `${file} imports ${fileName}, which is no module of the tree`);
      targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

function sourceFiles(root: string, folder: string): string[] {
  return readdirSync(path.join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.posix.join(folder, f.split(path.sep).join('/')));
}

const COLLECTIONS = new Set(['lib', 'providers', 'cli']);

/** lib/attestation/variants/x.ts -> lib/attestation; lib/errors.ts -> lib/errors.ts; bootstrapper/kubernetes/x.ts -> bootstrapper. */
function areaOf(file: string): string {
  const parts = file.split('/');
  return COLLECTIONS.has(parts[0]!) ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The graph between groups of modules (edges inside a group dropped). */
function collapse(graph: Graph, group: (file: string) => string): Graph {
  const out: Graph = new Map();
  for (const [from, targets] of graph) {
    const edges = out.get(group(from)) ?? new Set<string>();
    out.set(group(from), edges);
    for (const to of targets) if (group(to) !== group(from)) edges.add(group(to));
  }
  return out;
}

/** The strongly connected components with more than one node (Tarjan), each sorted, sorted by first node. */
function circles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

function upwardImports(graph: Graph): string[] {
  return [...graph].flatMap(([from, targets]) =>
    from.startsWith('lib/') ? [...targets].filter((t) => ABOVE_LIB.test(t)).map((t) => `${from} -> ${t}`) : [],
  );
}
