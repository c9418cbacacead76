/** The Azure ProviderModule as the registry loads it: name, attestation variants, and its factories. */
import assert from 'node:assert/strict';
import { loadProvider } from '../../../providers/registry.js';

describe('azure provider module', function () {
  it('is loaded by name and builds infrastructure and IAM', async function () {
    const azure = await loadProvider('azure');
    assert.equal(azure.name, 'azure');
    assert.deepEqual([...azure.attestationVariants], ['azure-sev-snp', 'azure-tdx', 'azure-trustedlaunch']);
    const infra = await azure.infrastructure({ endpoint: 'https://127.0.0.1:1' });
    assert.equal(infra.name, 'azure');
    assert.equal(typeof (await azure.iam!({})).create, 'function');
    await assert.rejects(
      async () => azure.infrastructure({ credential: 'not a credential' }),
      /must be a TokenCredential/,
    );
  });
});
