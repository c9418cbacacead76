/**
 * The kernel modules a node image loads at boot, with their dependencies, in load order. Debian's kernel package
 * ships the modules but no modules.dep (depmod makes it on installation), so the dependencies are read from each
 * module's own `.modinfo` (`depends=a,b`); modules built into the kernel (modules.builtin) need nothing. The initrd
 * gets the module files, a modules.dep written from what was read, and the ordered list /init loads with insmod
 * (docs/workflows/node-images.md).
 */
import { promises as fs } from 'node:fs';
import { UserError } from '../../errors.js';
import type { SourceNode } from './rootfs.js';

const norm = (name: string) => name.replace(/-/g, '_');

/** `depends=` of a module file's .modinfo (names, possibly empty). */
export function moduleDepends(data: Buffer): string[] {
  const at = data.indexOf('\0depends=');
  if (at < 0) return [];
  const start = at + '\0depends='.length;
  const value = data.subarray(start, data.indexOf(0, start)).toString('latin1');
  return value.split(',').filter(Boolean);
}

export interface ModulePlan {
  /** Module files (tree paths) in load order: every module after its dependencies. */
  order: string[];
  /** modules.dep text (paths relative to the modules folder). */
  modulesDep: string;
  /** Names asked for that are built in (nothing to load). */
  builtin: string[];
}

export async function planModules(
  index: Map<string, SourceNode>,
  release: string,
  wanted: readonly string[],
): Promise<ModulePlan> {
  const base = `usr/lib/modules/${release}`;
  const files = new Map<string, { path: string; source: string }>();
  for (const [p, node] of index) {
    if (node.type === 'file' && p.startsWith(`${base}/`) && p.endsWith('.ko'))
      files.set(norm(p.slice(p.lastIndexOf('/') + 1, -3)), { path: p, source: node.source });
  }
  const builtinNode = index.get(`${base}/modules.builtin`);
  const builtinNames = new Set<string>();
  if (builtinNode?.type === 'file') {
    for (const line of (await fs.readFile(builtinNode.source, 'utf8')).split('\n')) {
      if (line.endsWith('.ko')) builtinNames.add(norm(line.slice(line.lastIndexOf('/') + 1, -3)));
    }
  }
  const order: string[] = [];
  const deps = new Map<string, string[]>();
  const builtin: string[] = [];
  const visiting = new Set<string>();
  const visit = async (name: string): Promise<void> => {
    const n = norm(name);
    if (deps.has(n) || builtin.includes(n)) return;
    const file = files.get(n);
    if (!file) {
      if (builtinNames.has(n)) {
        builtin.push(n);
        return;
      }
      throw new UserError(`The kernel ${release} has no module ${name}, neither as a file nor built in.`, {
        hint: 'Check the module list of the provider in lib/node-image/build/init.ts.',
      });
    }
    if (visiting.has(n)) throw new Error(`module dependency cycle at ${name}`);
    visiting.add(n);
    const own = moduleDepends(await fs.readFile(file.source)).map(norm);
    for (const dep of own) await visit(dep);
    deps.set(n, own);
    order.push(file.path);
  };
  for (const name of wanted) await visit(name);
  const rel = (p: string) => p.slice(base.length + 1);
  const modulesDep = order
    .map((p) => {
      const n = norm(p.slice(p.lastIndexOf('/') + 1, -3));
      const direct = (deps.get(n) ?? []).filter((d) => files.has(d)).map((d) => rel(files.get(d)!.path));
      return `${rel(p)}:${direct.length ? ` ${direct.join(' ')}` : ''}\n`;
    })
    .sort()
    .join('');
  return { order, modulesDep, builtin };
}
