import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { editConfig } from '../../lib/config/edit.js';
import { upgradeCheck } from '../../cli/images/upgrade-check.js';
import { measurementChanges } from '../../lib/attestation/measurements.js';
import { generateConfigFiles, loadConfig, measurementsOf as configMeasurements } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { LocalImageStore, removeImageTree } from '../../providers/local/image-store.js';
import { fakeBuild, measurementsOf, setConfigKeys, tempDir, testSigner, writeSignedFile } from './support.js';
import { fillImageMeasurements } from '../support/image-measurements.js';

describe('upgrade check', () => {
  let dir: string;
  let ws: string;
  beforeEach(async () => {
    dir = await tempDir();
    ws = path.join(dir, 'ws');
    await fs.mkdir(ws);
  });
  afterEach(async () => {
    await removeImageTree(dir);
  });

  describe('local images', () => {
    let userConfigDir: string;
    let store: LocalImageStore;
    beforeEach(async () => {
      userConfigDir = path.join(dir, 'user-config');
      const nodeBinary = path.join(dir, 'node');
      await fs.writeFile(nodeBinary, 'runtime');
      store = new LocalImageStore({ userConfigDir, nodeBinary });
      for (const v of ['v1', 'v2', 'v3'])
        await store.create(v, await fakeBuild(path.join(dir, `repo-${v}`), `build ${v}`));
      // v3's measurements were edited after signing.
      const v3 = path.join(store.imageDir('v3'), 'measurements.json');
      await fs.chmod(v3, 0o644); // images are read-only: their owner can make a file writable
      await fs.writeFile(v3, (await fs.readFile(v3, 'utf8')).replace('"warnOnly": true', '"warnOnly": false'));
      await generateConfigFiles(ws, 'local');
      await setConfigKeys(ws, { image: 'v1' });
      await editConfig(ws, {
        measurements: (await store.measurements('v1', (await store.publicKey())!)).measurements,
        replaceMeasurements: true,
      });
    });

    it('lists every image against the config, with verified measurements, their changes, and the refused one', async () => {
      const key = (await store.publicKey())!;
      const [v1, v2] = [
        (await store.measurements('v1', key)).measurements,
        (await store.measurements('v2', key)).measurements,
      ];
      const result = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir });
      assert.equal(result.current.image, 'v1');
      assert.equal(result.current.version, 'v1');
      assert.deepEqual(
        result.images.map((i) => [i.version, i.relation, i.refused === undefined]),
        [
          ['v1', 'current', true],
          ['v2', 'newer', true],
          ['v3', 'newer', false],
        ],
      );
      assert.deepEqual(result.images[0].changes, []);
      assert.deepEqual(
        result.images[1].changes,
        [9, 11].map((index) => ({
          index,
          from: v1[String(index)].expected,
          to: v2[String(index)].expected,
          warnOnly: false,
        })),
      );
      assert.match(
        result.images[2].refused!,
        /The measurements of local image v3 .* do not verify with your local image key/,
      );
      assert.deepEqual(result.upgrade, { version: 'v2', image: 'v2', measurements: v2 });
      assert.equal(result.configUpdated, false);
      assert.deepEqual(result.kubernetes, {
        current: 'v1.32.10',
        supported: ['v1.31.14', 'v1.32.10', 'v1.33.6'],
        newer: ['v1.33.6'],
      });
    });

    it('--update-config writes the smallest verified upgrade (image and measurements), keeping the comments', async () => {
      const before = await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8');
      const result = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir, updateConfig: true });
      assert.equal(result.configUpdated, true);
      const config = await loadConfig(ws);
      assert.equal(config.image, 'v2');
      assert.deepEqual(configMeasurements(config), result.upgrade!.measurements);
      const after = await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8');
      for (const comment of [
        '# Node image: for the local provider',
        '# zero on our images',
        '# clusterID: zero until the node joins a cluster',
      ]) {
        assert.ok(before.includes(comment) && after.includes(comment), comment);
      }
      // On v2, the only newer image is v3, whose signature does not verify: nothing to upgrade to, nothing written.
      const again = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir, updateConfig: true });
      assert.equal(again.upgrade, undefined);
      assert.equal(again.configUpdated, false);
      assert.equal(await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8'), after);
    });

    it('never ranks an image whose name is not a numbered version as newer, nor recommends it', async () => {
      await store.create('test-build', await fakeBuild(path.join(dir, 'repo-test-build'), 'build test-build'));
      const result = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir });
      assert.equal(result.images.find((i) => i.version === 'test-build')?.relation, 'unordered');
      assert.equal(result.upgrade?.version, 'v2');
    });

    it('deletes an image; deleting it again is refused as an unknown version', async () => {
      await store.delete('v2');
      assert.deepEqual(
        (await store.list()).map((i) => i.version),
        ['v1', 'v3'],
      );
      await assert.rejects(fs.stat(store.imageDir('v2')), { code: 'ENOENT' });
      await assert.rejects(store.delete('v2'), /There is no local image v2/);
    });

    it('orders nothing against the current build (image: local)', async () => {
      await setConfigKeys(ws, { image: 'local' });
      const result = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir, updateConfig: true });
      assert.deepEqual(
        result.images.map((i) => i.relation),
        ['unordered', 'unordered', 'unordered'],
      );
      assert.equal(result.upgrade, undefined);
      assert.equal((await loadConfig(ws)).image, 'local');
    });
  });

  it('reads a cloud version index, maps image references to versions, and offers the next version', async () => {
    const signer = testSigner();
    const site = path.join(dir, 'site');
    const images = [];
    for (const [version, tag] of [
      ['v1.0.0', '01'],
      ['v1.1.0', '02'],
      ['v2.0.0', '03'],
    ] as const) {
      await writeSignedFile(
        path.join(site, version),
        'measurements.json',
        { version, variant: 'aws-sev-snp', measurements: measurementsOf(tag) },
        signer,
      );
      images.push({
        version,
        image: `ami-${tag}`,
        measurementsUrl: `${version}/measurements.json`,
        signatureUrl: `${version}/measurements.json.sig`,
      });
    }
    await fs.writeFile(path.join(site, 'index.json'), JSON.stringify({ images: images.reverse() }));
    await generateConfigFiles(ws, 'aws');
    await fillImageMeasurements(ws);
    await setConfigKeys(ws, { image: 'ami-01', measurementsSigningKey: signer.publicKeyPem });
    // The rest of an AWS config that `iam create` would fill.
    const file = path.join(ws, CONFIG_FILE);
    await fs.writeFile(
      file,
      (await fs.readFile(file, 'utf8'))
        .replace(/iamProfileControlPlane: ""/, 'iamProfileControlPlane: cp')
        .replace(/iamProfileWorkerNodes: ""/, 'iamProfileWorkerNodes: w'),
    );

    const result = await upgradeCheck({
      workspaceDir: ws,
      log: nullLogger,
      index: pathToFileURL(path.join(site, 'index.json')).href,
      updateConfig: true,
    });
    assert.deepEqual(result.current, {
      image: 'ami-01',
      version: 'v1.0.0',
      kubernetesVersion: 'v1.32.10',
      measurementsDigest: result.current.measurementsDigest,
    });
    assert.deepEqual(
      result.images.map((i) => [i.version, i.image, i.relation]),
      [
        ['v1.0.0', 'ami-01', 'current'],
        ['v1.1.0', 'ami-02', 'newer'],
        ['v2.0.0', 'ami-03', 'newer'],
      ],
    );
    assert.equal(result.upgrade?.version, 'v1.1.0');
    const config = await loadConfig(ws);
    assert.equal(config.image, 'ami-02');
    assert.deepEqual(configMeasurements(config), measurementsOf('02'));
  });

  it("qemu: lists the versions of the user's qemu image store and the config's image folder, and offers the next version", async () => {
    const signer = testSigner();
    const userConfigDir = path.join(dir, 'user-config');
    const image = async (folder: string, version: string, tag: string, key = signer) => {
      await writeSignedFile(
        folder,
        'measurements.json',
        { version, variant: 'qemu-vtpm' as never, measurements: measurementsOf(tag) },
        key,
      );
      await fs.writeFile(path.join(folder, `constellation-qemu-${version}.raw`), '');
    };
    await image(path.join(ws, 'images', 'one'), 'v0.0.1', '01');
    await image(path.join(userConfigDir, 'qemu-images', 'v0.0.2'), 'v0.0.2', '02');
    await image(path.join(userConfigDir, 'qemu-images', 'v0.0.3'), 'v0.0.3', '03', testSigner('another key'));
    await generateConfigFiles(ws, 'qemu');
    await setConfigKeys(ws, { image: './images/one', measurementsSigningKey: signer.publicKeyPem });
    await editConfig(ws, { measurements: measurementsOf('01'), replaceMeasurements: true });

    const result = await upgradeCheck({ workspaceDir: ws, log: nullLogger, userConfigDir, updateConfig: true });
    assert.equal(result.current.version, 'v0.0.1');
    assert.deepEqual(
      result.images.map((i) => [i.version, i.image, i.relation, i.refused === undefined]),
      [
        ['v0.0.1', './images/one', 'current', true],
        ['v0.0.2', 'v0.0.2', 'newer', true],
        ['v0.0.3', 'v0.0.3', 'newer', false],
      ],
    );
    assert.match(result.images[2].refused!, /v0\.0\.3/);
    assert.equal(result.upgrade?.image, 'v0.0.2');
    const config = await loadConfig(ws);
    assert.equal(config.image, 'v0.0.2');
    assert.deepEqual(configMeasurements(config), measurementsOf('02'));
  });

  it('describes measurement changes PCR by PCR, including PCRs added and dropped', () => {
    const from = { '4': { expected: 'AA', warnOnly: false }, '7': { expected: '00', warnOnly: true } };
    const to = { '4': { expected: 'aa', warnOnly: false }, '9': { expected: 'bb', warnOnly: false } };
    assert.deepEqual(measurementChanges(from, to), [
      { index: 7, from: '00', warnOnly: true },
      { index: 9, to: 'bb', warnOnly: false },
    ]);
  });
});
