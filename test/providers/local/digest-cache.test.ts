import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileDigestCache, hashFile } from '../../../providers/local/digest-cache.js';

describe('local provider: the image digest cache', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'digest-cache-'));
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it('answers from the cache file of an earlier process while the file is unchanged', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'cache', 'digests.json');
    const first = new FileDigestCache(cacheFile);
    assert.deepEqual(await first.digests(file), await hashFile(file));
    await first.save();
    assert.equal((await fs.stat(cacheFile)).mode & 0o777, 0o600);
    // Another process: its entry is used (shown by planting a value only the cache can have given).
    const planted = JSON.parse(await fs.readFile(cacheFile, 'utf8'));
    planted[file].sha256 = 'aa'.repeat(32);
    await fs.writeFile(cacheFile, JSON.stringify(planted));
    assert.equal((await new FileDigestCache(cacheFile).digests(file)).sha256.toString('hex'), 'aa'.repeat(32));
  });

  it('hashes a changed file anew, even when its modification time is set back', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile);
    const before = await cache.digests(file);
    await cache.save();
    const { atime, mtime } = await fs.stat(file);
    await fs.writeFile(file, 'node image v2'); // same size
    await fs.utimes(file, atime, mtime);
    const after = await new FileDigestCache(cacheFile).digests(file);
    assert.notDeepEqual(after, before);
    assert.deepEqual(after, await hashFile(file));
  });

  it('a broken cache file costs only the hashing', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'x');
    await fs.writeFile(path.join(dir, 'digests.json'), '{"not": json');
    assert.deepEqual(await new FileDigestCache(path.join(dir, 'digests.json')).digests(file), await hashFile(file));
  });
});
