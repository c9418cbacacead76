import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileExistsError, writeFileAtomic } from '../../lib/workspace/atomic-file.js';

describe('workspace/atomic-file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'atomic-file-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('writes the content with mode 0600 and leaves no temp file', async () => {
    const file = path.join(dir, 'a.json');
    await writeFileAtomic(file, '{"a":1}');
    assert.equal(await fs.readFile(file, 'utf8'), '{"a":1}');
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    assert.deepEqual(await fs.readdir(dir), ['a.json']);
  });

  it('replaces an existing file (also one with a wider mode) with a 0600 file', async () => {
    const file = path.join(dir, 'a.json');
    await fs.writeFile(file, 'old', { mode: 0o644 });
    await writeFileAtomic(file, new TextEncoder().encode('new'));
    assert.equal(await fs.readFile(file, 'utf8'), 'new');
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
  });

  it('exclusive never overwrites and leaves no temp file', async () => {
    const file = path.join(dir, 'secret.json');
    await writeFileAtomic(file, 'first', { exclusive: true });
    await assert.rejects(writeFileAtomic(file, 'second', { exclusive: true }), FileExistsError);
    assert.equal(await fs.readFile(file, 'utf8'), 'first');
    assert.deepEqual(await fs.readdir(dir), ['secret.json']);
  });

  it('leaves no temp file when the rename fails', async () => {
    const target = path.join(dir, 'taken');
    await fs.mkdir(target);
    await fs.writeFile(path.join(target, 'x'), '');
    await assert.rejects(writeFileAtomic(target, 'data'));
    assert.deepEqual(await fs.readdir(dir), ['taken']);
  });

  it('creates missing parent directories', async () => {
    const file = path.join(dir, 'ws', 'sub', 'f');
    await writeFileAtomic(file, 'x');
    assert.equal(await fs.readFile(file, 'utf8'), 'x');
  });
});
