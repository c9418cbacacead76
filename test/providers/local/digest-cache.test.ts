import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileDigestCache, hashFile, RACY_MS } from '../../../providers/local/digest-cache.js';

/** A clock well after the test's files were written, so they have rested (the racy-file rule). */
const later = () => Date.now() + RACY_MS + 1000;

describe('local provider: the image digest cache', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'digest-cache-'));
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  /** Plants a value in the cache file that only the cache can have given, so a test can see the entry was used. */
  async function plant(cacheFile: string, file: string): Promise<void> {
    const planted = JSON.parse(await fs.readFile(cacheFile, 'utf8'));
    planted[file].sha256 = 'aa'.repeat(32);
    await fs.writeFile(cacheFile, JSON.stringify(planted));
  }

  it('answers from the cache file of an earlier process while the file is unchanged', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'cache', 'digests.json');
    const first = new FileDigestCache(cacheFile, { now: later });
    assert.deepEqual(await first.digests(file), await hashFile(file));
    await first.save();
    assert.equal((await fs.stat(cacheFile)).mode & 0o777, 0o600);
    await plant(cacheFile, file);
    assert.equal(
      (await new FileDigestCache(cacheFile, { now: later }).digests(file)).sha256.toString('hex'),
      'aa'.repeat(32),
    );
  });

  it('keeps every digest computed concurrently (as an image is hashed) from a cache file that exists', async () => {
    const files = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const file = path.join(dir, `f${i}.bin`);
        await fs.writeFile(file, `file ${i}`);
        return file;
      }),
    );
    const cacheFile = path.join(dir, 'digests.json');
    const first = new FileDigestCache(cacheFile, { now: later });
    await first.digests(files[0]);
    await first.save();
    const second = new FileDigestCache(cacheFile, { now: later });
    await Promise.all(files.map((f) => second.digests(f)));
    await second.save();
    assert.deepEqual(Object.keys(JSON.parse(await fs.readFile(cacheFile, 'utf8'))).sort(), [...files].sort());
  });

  it('hashes a changed file anew, even when its modification time is set back', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile, { now: later });
    const before = await cache.digests(file);
    await cache.save();
    const { atime, mtime } = await fs.stat(file);
    await fs.writeFile(file, 'node image v2'); // same size
    await fs.utimes(file, atime, mtime);
    const after = await new FileDigestCache(cacheFile, { now: later }).digests(file);
    assert.notDeepEqual(after, before);
    assert.deepEqual(after, await hashFile(file));
  });

  it('hashes a file put in the place of the cached one (same name, size and modification time)', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile, { now: later });
    await cache.digests(file);
    await cache.save();
    const { atime, mtime } = await fs.stat(file);
    await fs.writeFile(`${file}.new`, 'node image v2');
    await fs.utimes(`${file}.new`, atime, mtime);
    await fs.rename(`${file}.new`, file);
    assert.deepEqual(await new FileDigestCache(cacheFile, { now: later }).digests(file), await hashFile(file));
  });

  it('keeps no digest of a file changed less than RACY_MS before it was hashed (a write in the same tick keeps ctime)', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile); // the real clock: the file was written just now
    assert.deepEqual(await cache.digests(file), await hashFile(file));
    await cache.save();
    await assert.rejects(fs.stat(cacheFile), { code: 'ENOENT' });
  });

  it('waitToRest (create): waits until a file just written has rested, then keeps its digest', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    let slept = 0;
    const cache = new FileDigestCache(cacheFile, {
      waitToRest: true,
      now: () => Date.now() + slept,
      sleep: async (ms) => void (slept += ms),
    });
    assert.deepEqual(await cache.digests(file), await hashFile(file));
    await cache.save();
    assert.ok(slept > 0 && slept <= RACY_MS + 10, `slept ${slept} ms`);
    assert.deepEqual(Object.keys(JSON.parse(await fs.readFile(cacheFile, 'utf8'))), [file]);
  });

  it('ignores a cache file that another user could have written (group- or world-writable)', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile, { now: later });
    await cache.digests(file);
    await cache.save();
    await plant(cacheFile, file);
    await fs.chmod(cacheFile, 0o622);
    assert.deepEqual(await new FileDigestCache(cacheFile, { now: later }).digests(file), await hashFile(file));
    await fs.chmod(cacheFile, 0o600);
    await fs.chmod(dir, 0o777);
    assert.deepEqual(await new FileDigestCache(cacheFile, { now: later }).digests(file), await hashFile(file));
  });

  it('ignores a cache file that belongs to another user', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'node image v1');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile, { now: later });
    await cache.digests(file);
    await cache.save();
    await plant(cacheFile, file);
    // As root the file is given away; otherwise this process poses as another (non-root) user.
    const root = process.geteuid?.() === 0;
    if (root) await fs.chown(cacheFile, 4242, 4242);
    const uid = root ? 0 : (await fs.stat(cacheFile)).uid + 1;
    assert.deepEqual(await new FileDigestCache(cacheFile, { now: later, uid }).digests(file), await hashFile(file));
  });

  it('drops the entries of files that are gone when it saves', async () => {
    const [a, b] = [path.join(dir, 'a.bin'), path.join(dir, 'b.bin')];
    await fs.writeFile(a, 'a');
    await fs.writeFile(b, 'b');
    const cacheFile = path.join(dir, 'digests.json');
    const cache = new FileDigestCache(cacheFile, { now: later });
    await cache.digests(a);
    await cache.save();
    await fs.rm(a);
    const next = new FileDigestCache(cacheFile, { now: later });
    await next.digests(b);
    await next.save();
    assert.deepEqual(Object.keys(JSON.parse(await fs.readFile(cacheFile, 'utf8'))), [b]);
  });

  it('a broken cache file costs only the hashing', async () => {
    const file = path.join(dir, 'image.bin');
    await fs.writeFile(file, 'x');
    await fs.writeFile(path.join(dir, 'digests.json'), '{"not": json', { mode: 0o600 });
    assert.deepEqual(
      await new FileDigestCache(path.join(dir, 'digests.json'), { now: later }).digests(file),
      await hashFile(file),
    );
  });
});
