import assert from 'node:assert/strict';
import { runCli } from '../support/cli.js';
import { SUPPORTED_KUBERNETES_VERSIONS } from '../../lib/config/versions.js';

describe('constellation version', () => {
  it('prints the CLI, Kubernetes and Node.js versions as JSON', async () => {
    const res = await runCli(['version', '--json']);
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as { version: string; kubernetesVersions: string[]; nodeVersion: string };
    assert.match(out.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(out.kubernetesVersions, [...SUPPORTED_KUBERNETES_VERSIONS]);
    assert.equal(out.nodeVersion, process.version);
  });

  it('rejects an unknown flag with a message and no stack trace', async () => {
    const res = await runCli(['version', '--bogus']);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /--bogus is not a flag of `constellation version`/);
    assert.doesNotMatch(res.stderr, /\n\s+at /);
  });
});
