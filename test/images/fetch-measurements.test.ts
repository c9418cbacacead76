import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fetchMeasurements } from '../../cli/images/fetch-measurements.js';
import { generateConfigFiles, loadConfig, measurementsOf as configMeasurements } from '../../lib/config/index.js';
import { SignatureError } from '../../lib/images/signed-measurements.js';
import { nullLogger } from '../../lib/logging/index.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { LocalImageStore, removeImageTree } from '../../providers/local/image-store.js';
import {
  fakeBuild,
  httpsFileServer,
  measurementsOf,
  setConfigKeys,
  tempDir,
  testSigner,
  writeSignedFile,
  type TestSigner,
} from './support.js';

describe('config fetch-measurements', () => {
  let dir: string;
  let ws: string;
  let signer: TestSigner;
  const configText = () => fs.readFile(path.join(ws, CONFIG_FILE), 'utf8');

  beforeEach(async () => {
    dir = await tempDir();
    ws = path.join(dir, 'ws');
    await fs.mkdir(ws);
    signer = testSigner();
  });
  afterEach(async () => {
    await removeImageTree(dir);
  });

  describe('on a cloud config', () => {
    beforeEach(async () => {
      await generateConfigFiles(ws, 'gcp');
      await setConfigKeys(ws, { measurementsSigningKey: signer.publicKeyPem });
    });

    it('writes the verified measurements as the whole set, keeping the comments; a second run changes nothing', async () => {
      const { file } = await writeSignedFile(
        path.join(dir, 'pub'),
        'measurements.json',
        { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('aa') },
        signer,
      );
      const before = await configText();
      const result = await fetchMeasurements({ workspaceDir: ws, log: nullLogger, url: file });
      assert.equal(result.version, 'v2.1.0');
      assert.equal(result.changed, true);
      assert.equal(result.key.fingerprint, signer.trusted.fingerprint);
      const config = await loadConfig(ws, { allowIncomplete: true });
      assert.deepEqual(
        configMeasurements(config),
        measurementsOf('aa'),
        'PCRs 0-3, 6, 7 of the defaults are gone: the file is the whole set',
      );
      const after = await configText();
      for (const comment of [
        '# yaml-language-server: $schema=',
        '# boot chain',
        '# clusterID: zero until the node joins a cluster',
        '# GCP project ID.',
      ]) {
        assert.ok(before.includes(comment) && after.includes(comment), comment);
      }
      assert.equal((await fetchMeasurements({ workspaceDir: ws, log: nullLogger, url: file })).changed, false);
      assert.equal(await configText(), after);
    });

    it('refuses a file edited after signing and changes nothing', async () => {
      const { file, signature } = await writeSignedFile(
        path.join(dir, 'pub'),
        'measurements.json',
        { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('aa') },
        signer,
      );
      await fs.writeFile(file, (await fs.readFile(file, 'utf8')).replace('"warnOnly": true', '"warnOnly": false'));
      const before = await configText();
      await assert.rejects(
        fetchMeasurements({ workspaceDir: ws, log: nullLogger, url: file, signatureUrl: signature }),
        (err: Error) =>
          err instanceof SignatureError &&
          err.message.includes(`The measurements ${file} do not verify with the config's measurementsSigningKey`),
      );
      assert.equal(await configText(), before);
    });

    it('refuses, without a key in the config, what the release key did not sign', async () => {
      const ws2 = path.join(dir, 'ws2');
      await fs.mkdir(ws2);
      await generateConfigFiles(ws2, 'gcp');
      const { file } = await writeSignedFile(
        path.join(dir, 'pub'),
        'measurements.json',
        { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('aa') },
        signer,
      );
      const before = await fs.readFile(path.join(ws2, CONFIG_FILE), 'utf8');
      await assert.rejects(
        fetchMeasurements({ workspaceDir: ws2, log: nullLogger, url: file }),
        /do not verify with the release key of this CLI \(key SHA-256 8d03cd76740d9e06…\)/,
      );
      assert.equal(await fs.readFile(path.join(ws2, CONFIG_FILE), 'utf8'), before);
    });

    it('refuses correctly signed measurements of another attestation variant', async () => {
      const { file } = await writeSignedFile(
        path.join(dir, 'pub'),
        'measurements.json',
        { version: 'v2.1.0', variant: 'aws-sev-snp', measurements: measurementsOf('aa') },
        signer,
      );
      const before = await configText();
      await assert.rejects(
        fetchMeasurements({ workspaceDir: ws, log: nullLogger, url: file }),
        /are for attestation variant aws-sev-snp, not for gcp-sev-snp/,
      );
      assert.equal(await configText(), before);
    });

    it("looks the config's image up in a version index served over HTTPS", async () => {
      const root = path.join(dir, 'site');
      await writeSignedFile(
        path.join(root, 'v2.1.0'),
        'measurements.json',
        { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('bb') },
        signer,
      );
      await fs.writeFile(
        path.join(root, 'index.json'),
        JSON.stringify({
          images: [
            {
              version: 'v2.1.0',
              image: 'projects/p/global/images/other-variant',
              variant: 'gcp-sev-es',
              measurementsUrl: 'nope',
              signatureUrl: 'nope',
            },
            {
              version: 'v2.1.0',
              image: 'projects/p/global/images/constellation-v2-1-0',
              measurementsUrl: 'v2.1.0/measurements.json',
              signatureUrl: 'v2.1.0/measurements.json.sig',
            },
          ],
        }),
      );
      await setConfigKeys(ws, { image: 'projects/p/global/images/constellation-v2-1-0' });
      const server = await httpsFileServer(root);
      try {
        const result = await fetchMeasurements({
          workspaceDir: ws,
          log: nullLogger,
          index: `${server.url}index.json`,
          read: { ca: server.ca },
        });
        assert.equal(result.source, `${server.url}v2.1.0/measurements.json`);
        assert.deepEqual(server.requests.sort(), [
          '/index.json',
          '/v2.1.0/measurements.json',
          '/v2.1.0/measurements.json.sig',
        ]);
        assert.deepEqual(configMeasurements(await loadConfig(ws, { allowIncomplete: true })), measurementsOf('bb'));
      } finally {
        await server.close();
      }
    });

    it('says what to give when neither a URL nor an index names the file', async () => {
      await assert.rejects(fetchMeasurements({ workspaceDir: ws, log: nullLogger }), /The config names no image/);
      await setConfigKeys(ws, { image: 'ami-0123' });
      await assert.rejects(
        fetchMeasurements({ workspaceDir: ws, log: nullLogger }),
        /Images of a cloud are listed in a version index; none was given/,
      );
    });
  });

  describe('on a local config', () => {
    let userConfigDir: string;
    beforeEach(async () => {
      userConfigDir = path.join(dir, 'user-config');
      await generateConfigFiles(ws, 'local');
      const nodeBinary = path.join(dir, 'node');
      await fs.writeFile(nodeBinary, 'runtime');
      await new LocalImageStore({ userConfigDir, nodeBinary }).create('v1', await fakeBuild(path.join(dir, 'repo')));
    });

    it("takes the config's image from the user's local images, verified with the user's image key", async () => {
      await setConfigKeys(ws, { image: 'v1' });
      const result = await fetchMeasurements({ workspaceDir: ws, log: nullLogger, userConfigDir });
      assert.match(result.key.name, /^your local image key \(/);
      const signed = JSON.parse(
        await fs.readFile(path.join(userConfigDir, 'images', 'v1', 'measurements.json'), 'utf8'),
      );
      assert.deepEqual(configMeasurements(await loadConfig(ws)), signed.measurements);
    });

    it('has nothing to fetch for the current build', async () => {
      await assert.rejects(
        fetchMeasurements({ workspaceDir: ws, log: nullLogger, userConfigDir }),
        /Image "local" is the current build: it has no signed measurements/,
      );
    });
  });
});
