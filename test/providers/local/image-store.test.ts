import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { imageMeasurementsDigest } from '../../../lib/attestation/measurements.js';
import { UserError } from '../../../lib/errors.js';
import { verifyBlob } from '../../../lib/images/cosign-signature.js';
import { trustedKeyFromPem } from '../../../lib/signing-keys.js';
import { SignatureError } from '../../../lib/images/signed-measurements.js';
import { expectedImageMeasurements } from '../../../providers/local/image-measurement.js';
import { LocalImageStore } from '../../../providers/local/image-store.js';
import { fakeBuild, tempDir, testSigner } from '../../images/support.js';

describe('local images (mini image create / list)', () => {
  let dir: string;
  let build: string;
  let nodeBinary: string;
  let store: LocalImageStore;
  beforeEach(async () => {
    dir = await tempDir();
    build = await fakeBuild(path.join(dir, 'repo'));
    // A small stand-in for the Node.js binary: it is only hashed (PCR 4), and hashing the real one takes a while.
    nodeBinary = path.join(dir, 'node');
    await fs.writeFile(nodeBinary, 'node runtime');
    store = new LocalImageStore({ userConfigDir: path.join(dir, 'config'), nodeBinary, now: () => new Date('2026-01-02T03:04:05Z') });
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('copies the build, measures it as the launcher will measure a node of it, and signs the measurements', async () => {
    const image = await store.create('v1', build);
    assert.equal(image.dir, path.join(dir, 'config', 'images', 'v1'));
    assert.equal(await fs.readFile(path.join(image.dir, 'dist', 'bootstrapper', 'main.js'), 'utf8'), '// build 1\n');
    assert.equal(await fs.readFile(path.join(image.dir, 'package.json'), 'utf8'), '{"type":"module"}\n');
    assert.equal(await fs.readlink(path.join(image.dir, 'node_modules', 'dep', 'alias.js')), 'index.js');

    // What a node booted from the image shows: the launcher measures store.nodeImage(v1).
    const booted = await expectedImageMeasurements(store.nodeImage('v1'));
    for (const [index, m] of Object.entries(booted)) assert.deepEqual(image.measurements[index], m, `PCR ${index}`);
    assert.deepEqual(image.measurements['15'], { expected: '0'.repeat(64), warnOnly: true }, "the variant's warn-only PCR 15 stays");
    assert.equal(image.measurementsDigest, imageMeasurementsDigest(booted));

    const file = await fs.readFile(path.join(image.dir, 'measurements.json'));
    assert.deepEqual(JSON.parse(file.toString()), { version: 'v1', variant: 'local-vtpm', measurements: image.measurements });
    const publicKey = trustedKeyFromPem(await fs.readFile(store.keyFiles.publicKeyFile, 'utf8'), 'pub');
    assert.equal(verifyBlob(publicKey.key, file, await fs.readFile(path.join(image.dir, 'measurements.json.sig'), 'utf8')), true, 'cosign verify-blob --key image-signing-key.pub would accept it');
    assert.deepEqual(JSON.parse(await fs.readFile(path.join(image.dir, 'image.json'), 'utf8')), { version: 'v1', created: '2026-01-02T03:04:05.000Z', source: build });
  });

  it('makes the image key on first use, private key 0600, and signs every later image with the same key', async () => {
    const first = await store.create('v1', build);
    assert.equal(first.keyCreated, true);
    assert.equal((await fs.stat(store.keyFiles.privateKeyFile)).mode & 0o777, 0o600);
    assert.match(await fs.readFile(store.keyFiles.privateKeyFile, 'utf8'), /^-----BEGIN PRIVATE KEY-----/);
    const pem = await fs.readFile(store.keyFiles.privateKeyFile, 'utf8');
    const second = await store.create('v2', build);
    assert.equal(second.keyCreated, false);
    assert.equal(await fs.readFile(store.keyFiles.privateKeyFile, 'utf8'), pem);
    const key = (await store.publicKey())!;
    assert.equal((await store.measurements('v2', key)).version, 'v2');
  });

  it('hard-links node_modules (no copy of the dependencies) but copies dist/, which a rebuild rewrites in place', async () => {
    const image = await store.create('v1', build);
    const [srcDep, imgDep] = await Promise.all([fs.stat(path.join(build, 'node_modules', 'dep', 'index.js')), fs.stat(path.join(image.dir, 'node_modules', 'dep', 'index.js'))]);
    assert.equal(imgDep.ino, srcDep.ino);
    const [srcMain, imgMain] = await Promise.all([fs.stat(path.join(build, 'dist', 'bootstrapper', 'main.js')), fs.stat(path.join(image.dir, 'dist', 'bootstrapper', 'main.js'))]);
    assert.notEqual(imgMain.ino, srcMain.ino);
    await fs.writeFile(path.join(build, 'dist', 'bootstrapper', 'main.js'), '// build 2\n');
    assert.equal(await fs.readFile(path.join(image.dir, 'dist', 'bootstrapper', 'main.js'), 'utf8'), '// build 1\n');
  });

  it('follows a node_modules that is a symbolic link (a copied CLI links the repository\'s)', async () => {
    const linked = path.join(dir, 'linked');
    await fs.mkdir(linked);
    await fs.cp(path.join(build, 'dist'), path.join(linked, 'dist'), { recursive: true });
    await fs.copyFile(path.join(build, 'package.json'), path.join(linked, 'package.json'));
    await fs.symlink(path.join(build, 'node_modules'), path.join(linked, 'node_modules'));
    const image = await store.create('v1', linked);
    assert.equal((await fs.lstat(path.join(image.dir, 'node_modules'))).isDirectory(), true);
    assert.equal(await fs.readFile(path.join(image.dir, 'node_modules', 'dep', 'index.js'), 'utf8'), 'module.exports = 1;\n');
  });

  it('gives another build other measurements (PCR 9 and 11), the same runtime the same PCR 4', async () => {
    const v1 = await store.create('v1', build);
    const build2 = await fakeBuild(path.join(dir, 'repo2'), 'build 2');
    const v2 = await store.create('v2', build2);
    assert.notEqual(v2.measurements['9'].expected, v1.measurements['9'].expected);
    assert.notEqual(v2.measurements['11'].expected, v1.measurements['11'].expected);
    assert.equal(v2.measurements['4'].expected, v1.measurements['4'].expected);
    assert.notEqual(v2.measurementsDigest, v1.measurementsDigest);
  });

  it('lists the images oldest first with their digests and verified signatures', async () => {
    let t = 0;
    store = new LocalImageStore({ userConfigDir: path.join(dir, 'config'), nodeBinary, now: () => new Date(Date.UTC(2026, 0, 1, 0, 0, t++)) });
    const v10 = await store.create('v10', build);
    const v9 = await store.create('v9', build);
    assert.deepEqual(
      (await store.list()).map((i) => [i.version, i.created, i.measurementsDigest, i.signature]),
      [
        ['v10', '2026-01-01T00:00:00.000Z', v10.measurementsDigest, 'verified'],
        ['v9', '2026-01-01T00:00:01.000Z', v9.measurementsDigest, 'verified'],
      ],
    );
  });

  it('refuses measurements edited after signing, and lists the image as bad', async () => {
    const image = await store.create('v1', build);
    const file = path.join(image.dir, 'measurements.json');
    await fs.writeFile(file, (await fs.readFile(file, 'utf8')).replace(image.measurements['9'].expected, 'ff'.repeat(32)));
    const key = (await store.publicKey())!;
    await assert.rejects(store.measurements('v1', key), (err: Error) => err instanceof SignatureError && err.message.includes(`of local image v1 (${file}) do not verify with your local image key`));
    assert.deepEqual((await store.list()).map((i) => [i.version, i.signature, i.measurementsDigest]), [['v1', 'bad', '']]);
  });

  it('refuses measurements signed with another key than the one asked for', async () => {
    await store.create('v1', build);
    await assert.rejects(store.measurements('v1', testSigner("the config's measurementsSigningKey").trusted), /do not verify with the config's measurementsSigningKey/);
  });

  it('never changes an image: the same version again is refused', async () => {
    await store.create('v1', build);
    await assert.rejects(store.create('v1', build), (err: Error) => err instanceof UserError && /The local image v1 exists already/.test(err.message));
  });

  it('refuses `local`, names that are no versions, and folders that are not a build', async () => {
    await assert.rejects(store.create('local', build), /"local" names the current build, not an image version/);
    await assert.rejects(store.create('../v1', build), /is not an image version/);
    await fs.rm(path.join(build, 'node_modules'), { recursive: true });
    await fs.rm(path.join(build, 'package.json'));
    await assert.rejects(store.create('v1', build), new RegExp(`${build} is not a build to make an image of: package.json, node_modules are missing`));
    assert.deepEqual(await store.list(), []);
  });

  it('names the commands when an image does not exist', async () => {
    await store.create('v1', build);
    const key = (await store.publicKey())!;
    await assert.rejects(store.measurements('v7', key), (err: UserError) => /There is no local image v7/.test(err.message) && /mini image create v7/.test(err.hint ?? ''));
  });

  it('removes the temporary folder of a create that was killed, and leaves no trace of a failed one', async () => {
    await fs.mkdir(path.join(store.imagesDir, '.creating-v1-999999999-abcd'), { recursive: true });
    await store.create('v1', build);
    assert.deepEqual((await fs.readdir(store.imagesDir)).sort(), ['v1']);
    // A runtime that is not there fails the measurement, after the copy was made.
    const broken = new LocalImageStore({ userConfigDir: path.join(dir, 'config'), nodeBinary: path.join(dir, 'no-node') });
    await assert.rejects(broken.create('v2', build), /ENOENT/);
    assert.deepEqual((await fs.readdir(store.imagesDir)).sort(), ['v1']);
  });
});
