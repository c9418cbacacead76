import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { generateConfigFiles } from '../../lib/config/index.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import {
  httpsFileServer,
  measurementsOf,
  setConfigKeys,
  tempDir,
  testSigner,
  writeSignedFile,
  type HttpsFileServer,
} from '../images/support.js';
import { runCli } from '../support/cli.js';

describe('constellation config fetch-measurements (built CLI, measurements served over HTTPS)', () => {
  let dir: string;
  let ws: string;
  let server: HttpsFileServer;
  let env: NodeJS.ProcessEnv;
  const signer = testSigner();

  before(async () => {
    dir = await tempDir();
    const site = path.join(dir, 'site');
    await writeSignedFile(
      path.join(site, 'good'),
      'measurements.json',
      { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('aa') },
      signer,
    );
    const edited = await writeSignedFile(
      path.join(site, 'edited'),
      'measurements.json',
      { version: 'v2.1.0', variant: 'gcp-sev-snp', measurements: measurementsOf('aa') },
      signer,
    );
    await fs.writeFile(edited.file, (await fs.readFile(edited.file, 'utf8')).replace('aaaa', 'aaab'));
    server = await httpsFileServer(site);
    const caFile = path.join(dir, 'ca.pem');
    await fs.writeFile(caFile, server.ca);
    // The CLI trusts the test server's CA the way a user would add a private CA.
    env = { NODE_EXTRA_CA_CERTS: caFile };
  });
  beforeEach(async () => {
    ws = await fs.mkdtemp(path.join(dir, 'ws-'));
    await generateConfigFiles(ws, 'gcp');
    await setConfigKeys(ws, { measurementsSigningKey: signer.publicKeyPem });
  });
  after(async () => {
    await server.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('verifies the signature and writes the measurements into the config', async () => {
    const res = await runCli(['config', 'fetch-measurements', '-C', ws, '-u', `${server.url}good/measurements.json`], {
      env,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(
      res.stdout,
      new RegExp(
        `Verified the measurements of image v2\\.1\\.0 \\(gcp-sev-snp\\) from ${server.url}good/measurements\\.json`,
      ),
    );
    assert.match(
      res.stdout,
      new RegExp(`signed by the config's measurementsSigningKey, key SHA-256 ${signer.trusted.fingerprint}`),
    );
    assert.match(res.stdout, /Wrote them into the config\./);
    assert.ok((await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8')).includes(`expected: ${'aa'.repeat(32)}`));
  });

  it('says a bad signature changed nothing, and changes nothing', async () => {
    const before = await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8');
    const res = await runCli(
      ['config', 'fetch-measurements', '-C', ws, '-u', `${server.url}edited/measurements.json`],
      { env },
    );
    assert.equal(res.code, 1);
    assert.match(
      res.stderr,
      /^Error: The measurements https:\/\/127\.0\.0\.1:\d+\/edited\/measurements\.json do not verify with the config's measurementsSigningKey/,
    );
    assert.match(res.stderr, /Hint: Nothing was changed\./);
    assert.doesNotMatch(res.stderr, /This is a bug/);
    assert.equal(await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8'), before);
  });
});
