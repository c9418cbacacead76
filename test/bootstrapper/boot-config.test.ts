/** How the node program learns where it runs: kernel command line, the image's boot config file, else local. */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCmdline, readBootConfig } from '../../bootstrapper/boot-config.js';
import { UserError } from '../../lib/errors.js';

describe('bootstrapper/boot-config', () => {
  let dir: string;
  let cmdlineFile: string;
  let configFile: string;
  const write = (file: string, text: string) => fs.writeFile(file, text);
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'boot-config-'));
    cmdlineFile = path.join(dir, 'cmdline');
    configFile = path.join(dir, 'boot.json');
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it('parses key=value words of a kernel command line, quoted values included', () => {
    const words = parseCmdline('BOOT_IMAGE=/vmlinuz ro console="ttyS0 115200" constellation.csp=gcp quiet\n');
    assert.equal(words.get('constellation.csp'), 'gcp');
    assert.equal(words.get('console'), 'ttyS0 115200');
    assert.equal(words.get('quiet'), '');
  });

  it('takes provider and variant from the kernel command line, paths from the boot config', async () => {
    await write(cmdlineFile, 'ro constellation.csp=aws constellation.attestation-variant=aws-sev-snp');
    await write(
      configFile,
      JSON.stringify({
        paths: { tpm: '/tmp/tpm.sock', tsmRoot: '/tmp/tsm' },
        providerOptions: { imdsEndpoint: 'http://127.0.0.1:1' },
      }),
    );
    const boot = await readBootConfig({ cmdlineFile, configFile, env: {} });
    assert.equal(boot.provider, 'aws');
    assert.equal(boot.options.variant, 'aws-sev-snp');
    assert.deepEqual(boot.options.paths, { tpm: '/tmp/tpm.sock', tsmRoot: '/tmp/tsm' });
    assert.deepEqual(boot.options.providerOptions, { imdsEndpoint: 'http://127.0.0.1:1' });
  });

  it('takes everything from the boot config file (named by CONSTELLATION_BOOT_CONFIG) when the command line is silent', async () => {
    await write(cmdlineFile, 'ro quiet');
    await write(configFile, JSON.stringify({ csp: 'azure', attestationVariant: 'azure-sev-snp' }));
    const boot = await readBootConfig({ cmdlineFile, env: { CONSTELLATION_BOOT_CONFIG: configFile } });
    assert.deepEqual([boot.provider, boot.options.variant], ['azure', 'azure-sev-snp']);
  });

  it('is a local process node when neither names a cloud', async () => {
    const boot = await readBootConfig({
      cmdlineFile: path.join(dir, 'none'),
      configFile: path.join(dir, 'none.json'),
      env: { NODE_NAME: 'x' },
    });
    assert.equal(boot.provider, 'local');
    assert.equal(boot.options.variant, 'local-vtpm');
    assert.deepEqual(boot.options.env, { NODE_NAME: 'x' });
  });

  it('refuses a command line and a file that disagree, a missing variant and an unknown key', async () => {
    await write(cmdlineFile, 'constellation.csp=gcp constellation.attestation-variant=gcp-sev-snp');
    await write(configFile, JSON.stringify({ csp: 'aws' }));
    await assert.rejects(
      readBootConfig({ cmdlineFile, configFile, env: {} }),
      /constellation.csp=gcp, but .* says csp aws/,
    );
    await write(cmdlineFile, 'constellation.csp=gcp');
    await write(configFile, '{}');
    await assert.rejects(readBootConfig({ cmdlineFile, configFile, env: {} }), /names its attestation variant/);
    await write(configFile, JSON.stringify({ csp: 'gcp', attestationVariant: 'gcp-sev-snp', tpmPath: '/dev/tpm0' }));
    await assert.rejects(
      readBootConfig({ cmdlineFile: path.join(dir, 'none'), configFile, env: {} }),
      (err: Error) => err instanceof UserError && /is invalid/.test(err.message),
    );
  });
});
