/** The node image digests the launcher extends and `create` expects: deterministic, sensitive to every byte. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  entryInImage,
  expectedImageMeasurements,
  expectedPcrValues,
  extendFromZero,
  imageDirectoryDigests,
  imageEventDigests,
} from '../../../providers/local/image-measurement.js';
import { tempDir } from './support.js';

describe('local provider: image measurement', () => {
  let tmp: string;
  let image: { nodeBinary: string; imageDir: string; entry: string };

  beforeEach(async () => {
    tmp = await tempDir('cl-image-');
    const imageDir = path.join(tmp, 'image');
    await fs.mkdir(path.join(imageDir, 'bootstrapper'), { recursive: true });
    await fs.writeFile(path.join(imageDir, 'bootstrapper', 'main.js'), 'console.log("node");\n');
    await fs.writeFile(path.join(imageDir, 'b.js'), 'b');
    await fs.writeFile(path.join(imageDir, 'a.js'), 'a');
    await fs.writeFile(path.join(tmp, 'node'), 'a node binary');
    image = { nodeBinary: path.join(tmp, 'node'), imageDir, entry: path.join(imageDir, 'bootstrapper', 'main.js') };
  });

  afterEach(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('digests a directory over its sorted paths and contents, as documented', async () => {
    const h = (alg: string, data: string | Buffer) => createHash(alg).update(data).digest();
    const entry = (alg: string, rel: string, content: string) => Buffer.concat([Buffer.from(`${rel}\0f`), h(alg, content)]);
    for (const alg of ['sha256', 'sha384'] as const) {
      const expected = h(
        alg,
        Buffer.concat([entry(alg, 'a.js', 'a'), entry(alg, 'b.js', 'b'), entry(alg, 'bootstrapper/main.js', 'console.log("node");\n')]),
      );
      assert.deepEqual((await imageDirectoryDigests(image.imageDir))[alg], expected);
    }
  });

  it('changes with one byte, a renamed file, an added empty file or a symlink target', async () => {
    const base = (await imageDirectoryDigests(image.imageDir)).sha256.toString('hex');
    const seen = new Set([base]);
    const variant = async (change: () => Promise<void>, undo: () => Promise<void>) => {
      await change();
      const digest = (await imageDirectoryDigests(image.imageDir)).sha256.toString('hex');
      assert.ok(!seen.has(digest), 'a new digest');
      seen.add(digest);
      await undo();
      assert.equal((await imageDirectoryDigests(image.imageDir)).sha256.toString('hex'), base, 'back to the original');
    };
    const a = path.join(image.imageDir, 'a.js');
    await variant(() => fs.writeFile(a, 'A'), () => fs.writeFile(a, 'a'));
    await variant(() => fs.rename(a, `${a}x`), () => fs.rename(`${a}x`, a));
    await variant(() => fs.writeFile(path.join(image.imageDir, 'empty'), ''), () => fs.rm(path.join(image.imageDir, 'empty')));
    const link = path.join(image.imageDir, 'link');
    await variant(() => fs.symlink('a.js', link), () => fs.rm(link));
    await variant(() => fs.symlink('b.js', link), () => fs.rm(link));
  });

  it('gives PCR 4 the runtime, PCR 9 the image, PCR 11 the manifest naming the entry', async () => {
    const digests = await imageEventDigests(image);
    assert.deepEqual(digests.sha256[4], createHash('sha256').update('a node binary').digest());
    assert.deepEqual(digests.sha384[4], createHash('sha384').update('a node binary').digest());
    assert.deepEqual(digests.sha256[9], (await imageDirectoryDigests(image.imageDir)).sha256);
    const manifest = JSON.stringify({
      entry: 'bootstrapper/main.js',
      image: digests.sha256[9].toString('hex'),
      node: digests.sha256[4].toString('hex'),
    });
    assert.deepEqual(digests.sha256[11], createHash('sha256').update(manifest).digest());
    const other = await imageEventDigests({ ...image, entry: path.join(image.imageDir, 'a.js') });
    assert.notDeepEqual(other.sha256[11], digests.sha256[11], 'another entry of the same image is another boot');
  });

  it('computes PCR values as one extend from zero; expected measurements enforce 4, 8, 9, 11, 12, 13', async () => {
    const d = Buffer.alloc(32, 0xab);
    assert.deepEqual(extendFromZero('sha256', [d]), createHash('sha256').update(Buffer.alloc(32)).update(d).digest());
    assert.equal(extendFromZero('sha384', []).length, 48);
    const values = expectedPcrValues(await imageEventDigests(image));
    const measurements = await expectedImageMeasurements(image);
    assert.deepEqual(Object.keys(measurements), ['4', '8', '9', '11', '12', '13']);
    for (const [index, m] of Object.entries(measurements)) {
      assert.equal(m.warnOnly, false);
      assert.equal(m.expected, values.sha256.get(Number(index))?.toString('hex'));
    }
    assert.equal(measurements['8'].expected, '0'.repeat(64));
  });

  it('refuses an entry outside the image and a missing entry, with a message', async () => {
    assert.throws(() => entryInImage({ ...image, entry: image.nodeBinary }), /is not inside its image directory/);
    await assert.rejects(imageEventDigests({ ...image, entry: path.join(image.imageDir, 'missing.js') }), /does not exist/);
  });
});
