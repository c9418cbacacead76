import assert from 'node:assert/strict';
import { compareImageVersions, isImageVersion } from '../../lib/config/image-version.js';

describe('image versions', () => {
  const ascending = [
    'v1',
    'v1.0.1',
    'v1.2',
    'v2.0.0-rc1',
    'v2.0.0-rc2',
    'v2.0.0-rc10',
    'v2',
    'v2.0.1',
    'v10',
    'nightly',
    'zeta',
  ];
  for (let i = 0; i + 1 < ascending.length; i++) {
    it(`${ascending[i]} is older than ${ascending[i + 1]}`, () => {
      assert.ok(compareImageVersions(ascending[i], ascending[i + 1]) < 0);
      assert.ok(compareImageVersions(ascending[i + 1], ascending[i]) > 0);
    });
  }

  it('treats missing parts as zero and a leading v as optional', () => {
    assert.equal(compareImageVersions('v2', 'v2.0.0'), 0);
    assert.equal(compareImageVersions('2.1', 'v2.1.0'), 0);
  });

  it('sorts Kubernetes versions too', () => {
    assert.deepEqual(['v1.33.6', 'v1.31.14', 'v1.32.10'].sort(compareImageVersions), [
      'v1.31.14',
      'v1.32.10',
      'v1.33.6',
    ]);
  });

  it('accepts folder-safe names and refuses `local`, paths and empty names', () => {
    for (const ok of ['v1', 'v2.1.0-rc.1', '2025_11', 'a']) assert.equal(isImageVersion(ok), true, ok);
    for (const bad of ['local', '', '../v1', 'v1/x', '.hidden', '-v1', 'v 1', 'x'.repeat(65)])
      assert.equal(isImageVersion(bad), false, bad);
  });
});
