import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { loadProvider } from '../../../providers/registry.js';

describe('aws provider: module', () => {
  it('is found by name and offers the AWS attestation variants, SEV-SNP first', async () => {
    const provider = await loadProvider('aws');
    assert.equal(provider.name, 'aws');
    assert.deepEqual([...provider.attestationVariants], ['aws-sev-snp', 'aws-nitro-tpm']);
    const infra = await provider.infrastructure({ region: 'us-east-2' });
    assert.equal(infra.name, 'aws');
    assert.equal(typeof (await provider.iam!()).destroy, 'function');
  });
});
