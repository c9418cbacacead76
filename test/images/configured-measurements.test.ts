/**
 * `upgrade apply`'s first check: the config's measurements are exactly its image's signed ones, verified with the
 * config's key, before the rollout touches anything.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { verifyConfiguredMeasurements } from '../../cli/images/image-measurements.js';
import { editConfig } from '../../lib/config/edit.js';
import { generateConfigFiles, loadConfig } from '../../lib/config/index.js';
import { LocalImageStore, removeImageTree } from '../../providers/local/image-store.js';
import { fakeBuild, setConfigKeys, tempDir } from './support.js';

describe("upgrade apply's check of the config's measurements", () => {
  let dir: string;
  let ws: string;
  let userConfigDir: string;
  let store: LocalImageStore;
  const check = async () => verifyConfiguredMeasurements(await loadConfig(ws), { userConfigDir });
  const useImage = async (version: string) => {
    await setConfigKeys(ws, { image: version });
    await editConfig(ws, {
      measurements: (await store.measurements(version, (await store.publicKey())!)).measurements,
      replaceMeasurements: true,
    });
  };

  beforeEach(async () => {
    dir = await tempDir();
    ws = path.join(dir, 'ws');
    await fs.mkdir(ws);
    userConfigDir = path.join(dir, 'user-config');
    const nodeBinary = path.join(dir, 'node');
    await fs.writeFile(nodeBinary, 'runtime');
    store = new LocalImageStore({ userConfigDir, nodeBinary });
    for (const v of ['v1', 'v2']) await store.create(v, await fakeBuild(path.join(dir, `repo-${v}`), `build ${v}`));
    await generateConfigFiles(ws, 'local');
  });
  afterEach(async () => {
    await removeImageTree(dir);
  });

  it("accepts the image's signed measurements and says which key verified them", async () => {
    await useImage('v2');
    const signed = await check();
    assert.equal(signed?.version, 'v2');
    assert.equal(signed?.key.fingerprint, (await store.publicKey())!.fingerprint);
  });

  it('has nothing to check for the current build, which the CLI measures itself', async () => {
    assert.equal((await loadConfig(ws)).image, 'local');
    assert.equal(await check(), undefined);
  });

  it("refuses measurements that are another image's, naming the PCRs that differ", async () => {
    await useImage('v1');
    await setConfigKeys(ws, { image: 'v2' });
    await assert.rejects(check(), (err: Error & { hint?: string }) => {
      assert.match(
        err.message,
        /The config's measurements are not the signed measurements of image v2 .*PCR 9 is [0-9a-f]{64}, signed [0-9a-f]{64}; PCR 11 is/,
      );
      assert.match(err.hint ?? '', /config fetch-measurements/);
      return true;
    });
  });

  it('refuses a PCR that only warns where the signed file enforces it, and a missing PCR', async () => {
    await useImage('v2');
    const config = await loadConfig(ws);
    const measurements = { ...config.attestation.localVTPM!.measurements };
    measurements['9'] = { ...measurements['9'], warnOnly: true };
    delete measurements['11'];
    await editConfig(ws, { measurements, replaceMeasurements: true });
    await assert.rejects(check(), /PCR 9 has warnOnly true, signed false; PCR 11 is missing/);
  });

  it('refuses an image whose measurements file was edited after signing', async () => {
    await useImage('v2');
    const file = path.join(store.imageDir('v2'), 'measurements.json');
    await fs.chmod(file, 0o644); // images are read-only: their owner can make a file writable
    await fs.writeFile(
      file,
      (await fs.readFile(file, 'utf8')).replace(/"expected": "[0-9a-f]{64}"/, `"expected": "${'ab'.repeat(32)}"`),
    );
    await assert.rejects(check(), /do not verify with your local image key/);
  });
});
