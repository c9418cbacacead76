import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sourceCommit } from '../../lib/source-commit.js';

describe('the commit of a source build (constellation version)', () => {
  const A = 'a'.repeat(40);
  const B = 'b'.repeat(40);
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'source-commit-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });
  const write = async (rel: string, text: string) => {
    await fs.mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await fs.writeFile(path.join(dir, rel), text);
  };

  it('reads a detached HEAD, a loose ref and a packed ref', async () => {
    await write('.git/HEAD', `${A}\n`);
    assert.equal(await sourceCommit(dir), A);
    await write('.git/HEAD', 'ref: refs/heads/main\n');
    await write('.git/packed-refs', `# pack-refs with: peeled\n${B} refs/heads/main\n`);
    assert.equal(await sourceCommit(dir), B);
    await write('.git/refs/heads/main', `${A}\n`);
    assert.equal(await sourceCommit(dir), A, 'a loose ref wins over the packed one');
  });

  it("follows a worktree's .git file to its own HEAD and the common folder's refs", async () => {
    await write('main/.git/refs/heads/wip', `${B}\n`);
    await write('main/.git/worktrees/wt/HEAD', 'ref: refs/heads/wip\n');
    await write('main/.git/worktrees/wt/commondir', '../..\n');
    await write('wt/.git', `gitdir: ${path.join(dir, 'main/.git/worktrees/wt')}\n`);
    assert.equal(await sourceCommit(path.join(dir, 'wt')), B);
  });

  it('is undefined outside a checkout and for anything it cannot read as a commit', async () => {
    assert.equal(await sourceCommit(dir), undefined);
    await write('.git/HEAD', 'ref: refs/heads/gone\n');
    assert.equal(await sourceCommit(dir), undefined);
  });
});
