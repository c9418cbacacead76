/**
 * The node image digests the launcher extends and `create` expects: deterministic, sensitive to every byte of every
 * file of the bundled node program's folder, and refusing links (which could lead out of the image).
 */
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
} from '../../../providers/local/image-pcrs.js';
import { UserError } from '../../../lib/errors.js';
import { FileDigestCache } from '../../../providers/local/digest-cache.js';
import { defaultNodeProgram } from '../../../providers/local/node-program.js';
import { REPO_ROOT } from '../../support/cli.js';
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
    const entry = (alg: string, rel: string, content: string) =>
      Buffer.concat([Buffer.from(`${rel}\0f`), h(alg, content)]);
    for (const alg of ['sha256', 'sha384'] as const) {
      const expected = h(
        alg,
        Buffer.concat([
          entry(alg, 'a.js', 'a'),
          entry(alg, 'b.js', 'b'),
          entry(alg, 'bootstrapper/main.js', 'console.log("node");\n'),
        ]),
      );
      assert.deepEqual((await imageDirectoryDigests(image.imageDir))[alg], expected);
    }
  });

  it('changes with one byte, a renamed file or an added empty file', async () => {
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
    await variant(
      () => fs.writeFile(a, 'A'),
      () => fs.writeFile(a, 'a'),
    );
    await variant(
      () => fs.rename(a, `${a}x`),
      () => fs.rename(`${a}x`, a),
    );
    await variant(
      () => fs.writeFile(path.join(image.imageDir, 'empty'), ''),
      () => fs.rm(path.join(image.imageDir, 'empty')),
    );
  });

  it('refuses an image holding a symbolic link, to a file inside or outside it, or a folder link, naming it', async () => {
    for (const [rel, target] of [
      ['link.js', 'a.js'],
      ['bootstrapper/out.js', '/etc/hostname'],
      ['dir', '/usr/lib'],
    ]) {
      const link = path.join(image.imageDir, rel);
      await fs.symlink(target, link);
      await assert.rejects(
        imageDirectoryDigests(image.imageDir),
        (err: Error) => err instanceof UserError && err.message.includes(`holds a symbolic link (${rel})`),
      );
      await assert.rejects(imageEventDigests(image), /an image holds only regular files and folders/);
      await fs.rm(link);
    }
    const linkedImage = path.join(tmp, 'linked-image');
    await fs.symlink(image.imageDir, linkedImage);
    await assert.rejects(imageDirectoryDigests(linkedImage), /holds a symbolic link/);
  });

  it('on the real bundled node program (dist/node-program): a byte appended to any of its files changes PCR 9 and 11', async function () {
    this.timeout(300_000);
    const copy = path.join(tmp, 'node-program');
    await fs.cp(defaultNodeProgram(REPO_ROOT).imageDir, copy, { recursive: true });
    const real = { nodeBinary: image.nodeBinary, imageDir: copy, entry: path.join(copy, 'main.cjs') };
    const cache = new FileDigestCache();
    const base = await imageEventDigests(real, cache);
    const files = (await fs.readdir(copy, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => path.join(e.parentPath, e.name));
    assert.ok(
      files.some((f) => f.endsWith('koffi.node')) &&
        files.some((f) => f.endsWith('etcd3/rpc.json')) &&
        files.length > 10,
      'the bundle, its chunks and its native and data files',
    );
    for (const file of files) {
      const size = (await fs.stat(file)).size;
      await fs.appendFile(file, '\n');
      const changed = await imageEventDigests(real, cache);
      for (const alg of ['sha256', 'sha384'] as const) {
        assert.notDeepEqual(
          changed[alg][9],
          base[alg][9],
          `PCR 9 (${alg}) after a byte appended to ${path.relative(copy, file)}`,
        );
        assert.notDeepEqual(
          changed[alg][11],
          base[alg][11],
          `PCR 11 (${alg}) after a byte appended to ${path.relative(copy, file)}`,
        );
      }
      await fs.truncate(file, size);
    }
    assert.deepEqual(await imageEventDigests(real, cache), base, 'back to the original');
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
    await assert.rejects(
      imageEventDigests({ ...image, entry: path.join(image.imageDir, 'missing.js') }),
      /does not exist/,
    );
  });
});
