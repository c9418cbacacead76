import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { expectedClusterPcr } from '../../cli/cluster/verify.js';
import { expectedPcr15 } from '../../lib/kms/index.js';

describe('cli/cluster/verify: the PCR 15 a cluster ID gives', () => {
  it('is the SHA-256 value the key derivations define (docs/design.md#keys-and-identities), and SHA-384 has its own; other sizes have none', () => {
    const clusterId = randomBytes(32);
    assert.deepEqual(expectedClusterPcr(clusterId, 32), expectedPcr15(clusterId));
    assert.equal(expectedClusterPcr(clusterId, 48)?.length, 48);
    assert.equal(expectedClusterPcr(clusterId, 20), undefined);
  });
});
