/**
 * The initrd's file tree, assembled in memory from the extracted Debian packages and our own files, so that its
 * bytes depend on the inputs alone (not on the build machine's umask, owners or times). Paths follow Debian's merged
 * /usr: a package's `bin/`, `sbin/`, `lib/`, `lib64/` land below `usr/`, and the initrd has `bin -> usr/bin` and so on.
 *
 * The tree takes only what the node runs: the programs asked for and, transitively, every shared library their ELF
 * headers name (DT_NEEDED, resolved as ld.so does on Debian: RUNPATH, then the multiarch and plain library folders),
 * plus the program interpreter. A library no package provides is a build error naming it, so an image never boots
 * to "error while loading shared libraries" (docs/workflows/node-images.md).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../errors.js';
import type { CpioEntry } from './cpio.js';
import { elfDependencies, isElf } from './elf.js';

/** One file of an extracted package, by its path in the merged-/usr layout. */
export type SourceNode =
  | { type: 'file'; source: string; mode: number; origin: string }
  | { type: 'symlink'; target: string; origin: string }
  | { type: 'dir'; origin: string };

const MERGED = ['bin', 'sbin', 'lib', 'lib64'];
export const LIBRARY_DIRS = ['usr/lib/x86_64-linux-gnu', 'usr/lib', 'usr/lib64'];

/** `lib/x/y` -> `usr/lib/x/y`; other paths unchanged. */
export function mergedUsrPath(relative: string): string {
  const first = relative.split('/')[0];
  return MERGED.includes(first) ? `usr/${relative}` : relative;
}

/** Every path of the extracted packages (each a folder of `dpkg-deb -x`), merged; a path two packages hold differently is an error. */
export async function indexPackages(
  trees: ReadonlyArray<{ dir: string; origin: string }>,
): Promise<Map<string, SourceNode>> {
  const index = new Map<string, SourceNode>();
  const walk = async (root: string, origin: string, rel: string): Promise<void> => {
    const names = (await fs.readdir(path.join(root, rel))).sort();
    for (const name of names) {
      const relPath = rel ? `${rel}/${name}` : name;
      const abs = path.join(root, relPath);
      const st = await fs.lstat(abs);
      const key = mergedUsrPath(relPath);
      let node: SourceNode;
      if (st.isDirectory()) node = { type: 'dir', origin };
      else if (st.isSymbolicLink()) node = { type: 'symlink', target: await fs.readlink(abs), origin };
      else if (st.isFile()) node = { type: 'file', source: abs, mode: st.mode & 0o7777, origin };
      else continue;
      const before = index.get(key);
      if (before && before.type !== 'dir' && node.type !== 'dir' && before.origin !== origin) {
        // The same path from two packages (after merging /usr): the first package listed wins when both are the same
        // kind of file; a file in one and a link in the other is a conflict the package list must resolve.
        if (before.type !== node.type) throw new Error(`packages ${before.origin} and ${origin} both provide ${key}`);
      }
      if (!before) index.set(key, node);
      if (node.type === 'dir') await walk(root, origin, relPath);
    }
  };
  for (const tree of trees) await walk(tree.dir, tree.origin, '');
  return index;
}

export type TreeNode =
  | { type: 'file'; data: Buffer; mode: number }
  | { type: 'symlink'; target: string }
  | { type: 'dir'; mode: number }
  | { type: 'chardev'; mode: number; major: number; minor: number };

/** The initrd's tree being built: path (relative, merged /usr) -> node. */
export class RootTree {
  readonly nodes = new Map<string, TreeNode>();

  constructor(private readonly packages: Map<string, SourceNode>) {
    for (const dir of MERGED) this.nodes.set(dir, { type: 'symlink', target: `usr/${dir}` });
  }

  private ensureParents(p: string): void {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!this.nodes.has(dir)) this.nodes.set(dir, { type: 'dir', mode: 0o755 });
    }
  }

  dir(p: string, mode = 0o755): void {
    this.ensureParents(p);
    this.nodes.set(p, { type: 'dir', mode });
  }

  file(p: string, data: Buffer, mode = 0o644): void {
    this.ensureParents(p);
    this.nodes.set(p, { type: 'file', data, mode });
  }

  symlink(p: string, target: string): void {
    this.ensureParents(p);
    this.nodes.set(p, { type: 'symlink', target });
  }

  chardev(p: string, mode: number, major: number, minor: number): void {
    this.ensureParents(p);
    this.nodes.set(p, { type: 'chardev', mode, major, minor });
  }

  /** A symlink target made a tree path: absolute ones from the root (merged), relative ones from the link's folder. */
  private static resolveLink(linkPath: string, target: string): string {
    const joined = target.startsWith('/') ? target.slice(1) : path.posix.join(path.posix.dirname(linkPath), target);
    return mergedUsrPath(path.posix.normalize(joined));
  }

  /**
   * Copies a package path (following its symbolic links, which are kept as links) into the tree; for an ELF file
   * also its interpreter and the closure of its libraries. Returns the path of the file finally reached.
   */
  async addFromPackages(p: string, seen = new Set<string>()): Promise<string> {
    const key = mergedUsrPath(p);
    if (seen.has(key)) return key;
    seen.add(key);
    const node = this.packages.get(key);
    if (!node)
      throw new UserError(`No package of the node image provides /${key}.`, {
        hint: 'Add the Debian package that holds it to lib/node-image/build/packages.ts.',
      });
    if (node.type === 'symlink') {
      this.symlink(key, node.target);
      return this.addFromPackages(RootTree.resolveLink(key, node.target), seen);
    }
    if (node.type === 'dir') {
      this.dir(key);
      return key;
    }
    const data = await fs.readFile(node.source);
    this.file(key, data, node.mode);
    await this.addElfDependencies(key, data, seen);
    return key;
  }

  /** An ELF's interpreter and libraries, found among the packages' files (see the module header). */
  async addElfDependencies(who: string, data: Buffer, seen = new Set<string>()): Promise<void> {
    if (!isElf(data)) return;
    const deps = elfDependencies(data);
    if (!deps) throw new UserError(`/${who} is not a 64-bit x86 ELF file.`);
    if (deps.interpreter) await this.addFromPackages(deps.interpreter.replace(/^\//, ''), seen);
    for (const lib of deps.needed) {
      const dirs = [
        ...deps.runpath.map((d) => d.replace('$ORIGIN', `/${path.posix.dirname(who)}`).replace(/^\//, '')),
        ...LIBRARY_DIRS,
      ];
      const found = dirs
        .map((d) => mergedUsrPath(path.posix.normalize(`${d}/${lib}`)))
        .find((candidate) => this.packages.has(candidate) || this.nodes.has(candidate));
      if (!found) {
        throw new UserError(`/${who} needs the shared library ${lib}, which no package of the node image provides.`, {
          hint: `Add the Debian package that holds ${lib} (\`dpkg -S ${lib}\` names it) to lib/node-image/build/packages.ts.`,
        });
      }
      if (!this.nodes.has(found) || this.packages.has(found)) await this.addFromPackages(found, seen);
    }
  }

  /**
   * Checks that every ELF in the tree finds its interpreter and libraries inside the tree (what a chroot's
   * `ld.so --list` would show); returns the problems (empty when all resolve).
   */
  checkLibraries(): string[] {
    const problems: string[] = [];
    const resolve = (p: string, depth = 0): TreeNode | undefined => {
      const node = this.nodes.get(p);
      if (node?.type === 'symlink' && depth < 16) return resolve(RootTree.resolveLink(p, node.target), depth + 1);
      if (node) return node;
      // A path through a linked folder (lib64/x -> usr/lib64/x).
      const parts = p.split('/');
      for (let i = parts.length - 1; i > 0; i--) {
        const prefix = parts.slice(0, i).join('/');
        const n = this.nodes.get(prefix);
        if (n?.type === 'symlink' && depth < 16)
          return resolve(path.posix.join(RootTree.resolveLink(prefix, n.target), ...parts.slice(i)), depth + 1);
      }
      return undefined;
    };
    for (const [p, node] of this.nodes) {
      if (node.type !== 'file' || !isElf(node.data)) continue;
      const deps = elfDependencies(node.data);
      if (!deps) continue;
      if (deps.interpreter && resolve(deps.interpreter.replace(/^\//, ''))?.type !== 'file')
        problems.push(`/${p}: interpreter ${deps.interpreter} missing`);
      for (const lib of deps.needed) {
        const dirs = [
          ...deps.runpath.map((d) => d.replace('$ORIGIN', `/${path.posix.dirname(p)}`).replace(/^\//, '')),
          ...LIBRARY_DIRS,
        ];
        if (!dirs.some((d) => resolve(path.posix.normalize(`${d}/${lib}`))?.type === 'file'))
          problems.push(`/${p}: ${lib} missing`);
      }
    }
    return problems;
  }

  entries(): CpioEntry[] {
    return [...this.nodes].map(([p, n]): CpioEntry => {
      switch (n.type) {
        case 'file':
          return { path: p, type: 'file', mode: n.mode, data: n.data };
        case 'symlink':
          return { path: p, type: 'symlink', target: n.target };
        case 'dir':
          return { path: p, type: 'dir', mode: n.mode };
        case 'chardev':
          return { path: p, type: 'chardev', mode: n.mode, major: n.major, minor: n.minor };
      }
    });
  }
}
