/**
 * The cloud providers have one shape (providers/README.md, "Files"): the same modules in every cloud folder, so a
 * reader who knows one cloud finds the same step in the same file of another, and `infrastructure.ts` stays a facade
 * that wires the SDK clients to them.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../support/cli.js';

const CLOUDS = ['aws', 'gcp', 'azure'];
const SHARED = [
  'index',
  'plan',
  'create',
  'instances',
  'terminate',
  'infrastructure',
  'iam',
  'metadata',
  'node-platform',
  'clients',
  'options',
  'errors',
  'confidential',
];

describe('structure: every cloud provider has the same files', function () {
  for (const cloud of CLOUDS) {
    it(`providers/${cloud}/ has ${SHARED.length} shared modules and a small infrastructure.ts facade`, function () {
      const dir = path.join(REPO_ROOT, 'providers', cloud);
      assert.deepEqual(
        SHARED.filter((name) => !existsSync(path.join(dir, `${name}.ts`))),
        [],
      );
      const facade = readFileSync(path.join(dir, 'infrastructure.ts'), 'utf8');
      // A facade delegates: it imports its create, instances and terminate logic and stays short.
      for (const part of ['create', 'instances', 'terminate'])
        assert.match(facade, new RegExp(`from '\\./${part}\\.js'`));
      assert.ok(
        facade.split('\n').length <= 100,
        `providers/${cloud}/infrastructure.ts has ${facade.split('\n').length} lines`,
      );
    });
  }
});
