import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../support/cli.js';

// The package's `./attestation` export, loaded from the build the way a consumer loads it.
describe('package export ./attestation', () => {
  it('exposes the vTPM and SNP verification functions', async () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, string>;
    };
    const api = (await import(path.join(REPO_ROOT, pkg.exports['./attestation']))) as Record<string, unknown>;
    for (const name of [
      'verifyTpmQuote',
      'replayEventLog',
      'verifySnpReport',
      'verifyTdxQuote',
      'createValidator',
      'VtpmIssuer',
    ]) {
      assert.equal(typeof api[name], 'function', `${name} is exported`);
    }
  });
});
