/** The GCP ProviderModule: its name and variants, loading through the registry, and no SDK at load time. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { loadProvider } from '../../../providers/registry.js';
import { REPO_ROOT } from '../../support/cli.js';

describe('GCP provider module', () => {
  it('is found by the registry with its attestation variants', async () => {
    const provider = await loadProvider('gcp');
    assert.equal(provider.name, 'gcp');
    assert.deepEqual([...provider.attestationVariants], ['gcp-sev-snp', 'gcp-sev-es']);
    assert.equal(typeof provider.iam, 'function');
    assert.equal(typeof provider.attestationDeps, 'function');
  });

  it('does not load the Google Cloud SDK until it is used', () => {
    const script = `
      import { createRequire } from 'node:module';
      await import('./providers/gcp/index.ts');
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((k) => /google-cloud|google-gax/.test(k));
      console.log(loaded.length);`;
    const output = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    assert.equal(output.trim(), '0');
  });
});
