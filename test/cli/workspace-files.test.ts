/**
 * The built CLI against planted workspace files (issue 13, items 4 and 6): a symlink where the debug log or the
 * config goes is refused, not followed, and its target stays untouched; an oversized config is refused by size.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../support/cli.js';

const STACK_LINE = /\n\s+at /;

describe('constellation with planted workspace files', () => {
  let dir: string;
  let workspace: string;
  let target: string;
  const TARGET_TEXT = 'root:x:0:0:a file the user never meant constellation to touch\n';

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-planted-'));
    workspace = path.join(dir, 'ws');
    await fs.mkdir(workspace);
    target = path.join(dir, 'victim');
    await fs.writeFile(target, TARGET_TEXT);
    await fs.chmod(target, 0o644);
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('refuses a constellation-debug.log symlink with a clear message and leaves its target untouched', async () => {
    const generate = await runCli(['config', 'generate', 'local', '-C', workspace]);
    assert.equal(generate.code, 0, generate.stderr);
    const log = path.join(workspace, 'constellation-debug.log');
    await fs.symlink(target, log);

    const res = await runCli(['status', '-C', workspace]);
    assert.notEqual(res.code, 0);
    assert.equal(
      res.stderr.split('\n')[0],
      `Error: The debug log ${log} is a symbolic link, not a regular file: constellation does not follow links or open special files for it.`,
    );
    assert.match(
      res.stderr,
      new RegExp(
        `Hint: constellation neither follows nor replaces it: put the file itself at ${log}, or remove what is there`,
      ),
    );
    assert.doesNotMatch(res.stderr, STACK_LINE);
    assert.equal(await fs.readFile(target, 'utf8'), TARGET_TEXT);
    assert.equal((await fs.stat(target)).mode & 0o777, 0o644);
    assert.ok((await fs.lstat(log)).isSymbolicLink());
  });

  it('refuses a constellation-conf.yaml symlink instead of reading what it points to', async () => {
    const config = path.join(workspace, 'constellation-conf.yaml');
    await fs.symlink(target, config);
    const res = await runCli(['config', 'validate', '-C', workspace]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, new RegExp(`^Error: The config ${config} is a symbolic link, not a regular file`));
    assert.doesNotMatch(res.stderr, /root:x/);
    assert.equal(await fs.readFile(target, 'utf8'), TARGET_TEXT);
  });

  it('refuses a config over 1 MiB by its size, before parsing it', async () => {
    const config = path.join(workspace, 'constellation-conf.yaml');
    await fs.writeFile(config, `# ${'x'.repeat(3 * 1024 * 1024)}\n`);
    const res = await runCli(['config', 'validate', '-C', workspace]);
    assert.notEqual(res.code, 0);
    assert.equal(res.stderr.split('\n')[0], `Error: The config ${config} is 3 MiB; the limit is 1 MiB.`);
  });
});
