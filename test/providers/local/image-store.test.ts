import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { imageMeasurementsDigest } from '../../../lib/attestation/measurements.js';
import { UserError } from '../../../lib/errors.js';
import { verifyBlob } from '../../../lib/images/cosign-signature.js';
import { trustedKeyFromPem } from '../../../lib/signing-keys.js';
import { SignatureError } from '../../../lib/images/signed-measurements.js';
import { expectedImageMeasurements } from '../../../providers/local/image-pcrs.js';
import { LocalImageStore, removeImageTree } from '../../../providers/local/image-store.js';
import { fakeBuild, tempDir, testSigner } from '../../images/support.js';
import { requireTool } from '../../support/require-tool.js';

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
    store = new LocalImageStore({
      userConfigDir: path.join(dir, 'config'),
      nodeBinary,
      now: () => new Date('2026-01-02T03:04:05Z'),
    });
  });
  afterEach(async () => {
    await removeImageTree(dir);
  });

  it('copies the build, measures it as the launcher will measure a node of it, and signs the measurements', async () => {
    const image = await store.create('v1', build);
    assert.equal(image.dir, path.join(dir, 'config', 'images', 'v1'));
    assert.equal(await fs.readFile(path.join(image.dir, 'node-program', 'main.cjs'), 'utf8'), '// build 1\n');
    // Only what the node program runs: its folder, the measurements, the signature, the info.
    assert.deepEqual((await fs.readdir(image.dir)).sort(), [
      'image.json',
      'measurements.json',
      'measurements.json.sig',
      'node-program',
    ]);
    assert.deepEqual((await fs.readdir(path.join(image.dir, 'node-program'), { recursive: true })).sort(), [
      'chunk-ABC.cjs',
      'etcd3',
      'etcd3/rpc.proto',
      'main.cjs',
    ]);

    // What a node booted from the image shows: the launcher measures store.nodeImage(v1).
    const booted = await expectedImageMeasurements(store.nodeImage('v1'));
    for (const [index, m] of Object.entries(booted)) assert.deepEqual(image.measurements[index], m, `PCR ${index}`);
    assert.deepEqual(
      image.measurements['15'],
      { expected: '0'.repeat(64), warnOnly: true },
      "the variant's warn-only PCR 15 stays",
    );
    assert.equal(image.measurementsDigest, imageMeasurementsDigest(booted));

    const file = await fs.readFile(path.join(image.dir, 'measurements.json'));
    assert.deepEqual(JSON.parse(file.toString()), {
      version: 'v1',
      variant: 'local-vtpm',
      measurements: image.measurements,
    });
    const publicKey = trustedKeyFromPem(await fs.readFile(store.keyFiles.publicKeyFile, 'utf8'), 'pub');
    assert.equal(
      verifyBlob(publicKey.key, file, await fs.readFile(path.join(image.dir, 'measurements.json.sig'), 'utf8')),
      true,
      'cosign verify-blob --key image-signing-key.pub would accept it',
    );
    assert.deepEqual(JSON.parse(await fs.readFile(path.join(image.dir, 'image.json'), 'utf8')), {
      version: 'v1',
      created: '2026-01-02T03:04:05.000Z',
      source: build,
    });
  });

  it('boots an image made before the node program became CommonJS from its main.mjs, as it was measured', async () => {
    const image = await store.create('v1', build);
    const program = path.join(image.dir, 'node-program');
    // Such an image: main.mjs where main.cjs is now (the store's files are read-only; the folder is made writable here).
    await fs.chmod(program, 0o755);
    await fs.rename(path.join(program, 'main.cjs'), path.join(program, 'main.mjs'));
    assert.equal(store.nodeImage('v1').entry, path.join(program, 'main.mjs'));
    await fs.rename(path.join(program, 'main.mjs'), path.join(program, 'main.cjs'));
    assert.equal(store.nodeImage('v1').entry, path.join(program, 'main.cjs'));
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

  it("copies the node program (never links), read-only: files 0444, folders 0555, owned by the store's owner", async () => {
    const image = await store.create('v1', build);
    for (const rel of ['main.cjs', 'chunk-ABC.cjs', 'etcd3/rpc.proto']) {
      const [src, img] = await Promise.all([
        fs.stat(path.join(build, 'dist', 'node-program', rel)),
        fs.stat(path.join(image.dir, 'node-program', rel)),
      ]);
      assert.notEqual(img.ino, src.ino, `${rel} is a copy`);
      assert.equal(img.nlink, 1, `${rel} has no other name`);
      assert.equal(img.mode & 0o777, 0o444, rel);
      assert.equal(img.uid, process.getuid!(), rel);
    }
    for (const rel of ['', 'node-program', 'node-program/etcd3'])
      assert.equal((await fs.stat(path.join(image.dir, rel))).mode & 0o777, 0o555, rel || 'the version folder');
    for (const rel of ['measurements.json', 'measurements.json.sig', 'image.json'])
      assert.equal((await fs.stat(path.join(image.dir, rel))).mode & 0o777, 0o444, rel);
    // A rebuild (or the source's owner) changing the source changes nothing in the image.
    await fs.appendFile(path.join(build, 'dist', 'node-program', 'main.cjs'), '// build 2\n');
    assert.equal(await fs.readFile(path.join(image.dir, 'node-program', 'main.cjs'), 'utf8'), '// build 1\n');
  });

  it('refuses a build whose node program holds a symbolic link (it could lead out of the image), leaving no image', async () => {
    await fs.symlink('/etc/passwd', path.join(build, 'dist', 'node-program', 'etcd3', 'kv.proto'));
    await assert.rejects(
      store.create('v1', build),
      (err: Error) =>
        err instanceof UserError &&
        /kv\.proto is a symbolic link: a node image holds only regular files and folders/.test(err.message),
    );
    assert.deepEqual(await fs.readdir(store.imagesDir), []);
  });

  it("an owner of the source folder other than the store's cannot change the image made from it", async function () {
    requireTool(this, process.getuid!() === 0, 'root (to make a folder of another user and act as that user)'); // the setup runs as root
    const nobody = 65534;
    await fs.chown(build, nobody, nobody);
    for (const rel of await fs.readdir(build, { recursive: true }))
      await fs.chown(path.join(build, String(rel)), nobody, nobody);
    const image = await store.create('v1', build);
    // Every folder on the way is open to nobody (as a shared machine's might be): only the image's own modes protect it.
    for (const d of [dir, path.join(dir, 'config'), store.imagesDir]) await fs.chmod(d, 0o755);
    const files = (await fs.readdir(image.dir, { recursive: true })).map((rel) => path.join(image.dir, String(rel)));
    for (const f of [image.dir, ...files]) assert.notEqual((await fs.stat(f)).uid, nobody, `${f} is not nobody's`);
    const script = `
      const fs = require('node:fs');
      const tries = { append: () => fs.appendFileSync(process.argv[1], 'x'), create: () => fs.writeFileSync(process.argv[2], 'x'),
        remove: () => fs.unlinkSync(process.argv[1]), chmod: () => fs.chmodSync(process.argv[1], 0o666), rename: () => fs.renameSync(process.argv[1], process.argv[2]) };
      const out = {};
      for (const [name, f] of Object.entries(tries)) { try { f(); out[name] = 'done'; } catch (e) { out[name] = e.code; } }
      console.log(JSON.stringify(out));`;
    const main = path.join(image.dir, 'node-program', 'main.cjs');
    const res = spawnSync(process.execPath, ['-e', script, main, path.join(image.dir, 'node-program', 'payload.mjs')], {
      uid: nobody,
      gid: nobody,
      encoding: 'utf8',
    });
    assert.equal(res.status, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), {
      append: 'EACCES',
      create: 'EACCES',
      remove: 'EACCES',
      chmod: 'EPERM',
      rename: 'EACCES',
    });
    assert.equal(await fs.readFile(main, 'utf8'), '// build 1\n');
    // And what nobody changes in the source afterwards stays out of the image.
    const changed = spawnSync(
      process.execPath,
      [
        '-e',
        "require('node:fs').appendFileSync(process.argv[1], '// payload\\n')",
        path.join(build, 'dist', 'node-program', 'main.cjs'),
      ],
      { uid: nobody, gid: nobody },
    );
    assert.equal(changed.status, 0);
    assert.equal(await fs.readFile(main, 'utf8'), '// build 1\n');
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
    store = new LocalImageStore({
      userConfigDir: path.join(dir, 'config'),
      nodeBinary,
      now: () => new Date(Date.UTC(2026, 0, 1, 0, 0, t++)),
    });
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
    await fs.chmod(file, 0o644); // images are read-only: their owner can make a file writable
    await fs.writeFile(
      file,
      (await fs.readFile(file, 'utf8')).replace(image.measurements['9'].expected, 'ff'.repeat(32)),
    );
    const key = (await store.publicKey())!;
    await assert.rejects(
      store.measurements('v1', key),
      (err: Error) =>
        err instanceof SignatureError &&
        err.message.includes(`of local image v1 (${file}) do not verify with your local image key`),
    );
    assert.deepEqual(
      (await store.list()).map((i) => [i.version, i.signature, i.measurementsDigest]),
      [['v1', 'bad', '']],
    );
  });

  it('refuses measurements signed with another key than the one asked for', async () => {
    await store.create('v1', build);
    await assert.rejects(
      store.measurements('v1', testSigner("the config's measurementsSigningKey").trusted),
      /do not verify with the config's measurementsSigningKey/,
    );
  });

  it('never changes an image: the same version again is refused', async () => {
    await store.create('v1', build);
    await assert.rejects(
      store.create('v1', build),
      (err: Error) => err instanceof UserError && /The local image v1 exists already/.test(err.message),
    );
  });

  it('refuses `local`, names that are no versions, and folders that are not a build', async () => {
    await assert.rejects(store.create('local', build), /"local" names the current build, not an image version/);
    await assert.rejects(store.create('../v1', build), /is not an image version/);
    await fs.rm(path.join(build, 'dist', 'node-program', 'main.cjs'));
    await assert.rejects(
      store.create('v1', build),
      new RegExp(`${build} is not a build to make an image of: dist/node-program/main.cjs is missing`),
    );
    assert.deepEqual(await store.list(), []);
  });

  it('names the commands when an image does not exist', async () => {
    await store.create('v1', build);
    const key = (await store.publicKey())!;
    await assert.rejects(
      store.measurements('v7', key),
      (err: UserError) => /There is no local image v7/.test(err.message) && /mini image create v7/.test(err.hint ?? ''),
    );
  });

  it('removes the temporary folder of a create that was killed, and leaves no trace of a failed one', async () => {
    await fs.mkdir(path.join(store.imagesDir, '.creating-v1-999999999-abcd'), { recursive: true });
    await store.create('v1', build);
    assert.deepEqual((await fs.readdir(store.imagesDir)).sort(), ['v1']);
    // A runtime that is not there fails the measurement, after the copy was made.
    const broken = new LocalImageStore({
      userConfigDir: path.join(dir, 'config'),
      nodeBinary: path.join(dir, 'no-node'),
    });
    await assert.rejects(broken.create('v2', build), /ENOENT/);
    assert.deepEqual((await fs.readdir(store.imagesDir)).sort(), ['v1']);
  });
});
