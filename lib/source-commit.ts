/**
 * The git commit a source build runs from (`constellation version`), read from the checkout's .git without running
 * git: HEAD names a commit or a ref, the ref is a loose file or a line of packed-refs. Undefined outside a checkout
 * (an installed package) or when anything is unreadable: the version line then simply has no commit.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

const COMMIT = /^[0-9a-f]{40}$/;

export async function sourceCommit(root: string): Promise<string | undefined> {
  try {
    let gitDir = path.join(root, '.git');
    const stat = await fs.stat(gitDir);
    // A worktree or submodule: .git is a file "gitdir: <path>".
    if (stat.isFile())
      gitDir = path.resolve(root, (await fs.readFile(gitDir, 'utf8')).replace(/^gitdir:\s*/, '').trim());
    const head = (await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8')).trim();
    if (COMMIT.test(head)) return head;
    const ref = /^ref:\s*(\S+)$/.exec(head)?.[1];
    if (!ref) return undefined;
    // A worktree's refs live in the common git folder.
    const common = await fs.readFile(path.join(gitDir, 'commondir'), 'utf8').then(
      (d) => path.resolve(gitDir, d.trim()),
      () => gitDir,
    );
    for (const dir of [gitDir, common]) {
      const loose = await fs.readFile(path.join(dir, ref), 'utf8').catch(() => undefined);
      if (loose && COMMIT.test(loose.trim())) return loose.trim();
    }
    const packed = await fs.readFile(path.join(common, 'packed-refs'), 'utf8').catch(() => '');
    const line = packed.split('\n').find((l) => l.endsWith(` ${ref}`));
    const commit = line?.split(' ')[0];
    return commit && COMMIT.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}
