/**
 * Every component folder explains itself where its code is, as upstream Constellation's components do: a README.md
 * with a Mermaid sequence diagram and a "Files" section listing its files in the order data flows through them. The
 * list cannot drift: every file or folder it names exists, and every module and subfolder directly in the folder is
 * named (a new module adds its line to the README).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../support/cli.js';
import { section } from './support/markdown.js';

const COMPONENT_FOLDERS = [
  'bootstrapper',
  'joinservice',
  'providers',
  'cli',
  'lib/attestation',
  'lib/atls',
  'lib/cluster-store',
];

/** The names a README's "Files" section puts first in a table row, as `code`: `init-server.ts`, `state-disk/`. */
function listedFiles(readme: string): string[] {
  return section(readme, /^Files$/)
    .filter((line) => line.startsWith('|'))
    .map((line) => /^\|\s*`([^`]+)`/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined);
}

describe('structure: a README in every component folder', function () {
  for (const folder of COMPONENT_FOLDERS) {
    describe(`${folder}/`, function () {
      const dir = path.join(REPO_ROOT, folder);
      const readmePath = path.join(dir, 'README.md');
      const readme = existsSync(readmePath) ? readFileSync(readmePath, 'utf8') : '';

      it('has a README.md with a Mermaid sequence diagram', function () {
        assert.ok(readme, `${folder}/README.md is missing`);
        assert.match(readme, /```mermaid\n\s*sequenceDiagram\n/);
      });

      it('names only files and folders that exist', function () {
        const listed = listedFiles(readme);
        assert.ok(listed.length > 0, `${folder}/README.md has no "## Files" table`);
        assert.deepEqual(
          listed.filter((name) => !existsSync(path.join(dir, name))),
          [],
        );
      });

      it('names every module and subfolder of the folder', function () {
        const listed = new Set(listedFiles(readme));
        const present = readdirSync(dir, { withFileTypes: true })
          .filter((e) => (e.isDirectory() && !e.name.startsWith('.')) || (e.isFile() && e.name.endsWith('.ts')))
          .map((e) => (e.isDirectory() ? `${e.name}/` : e.name));
        assert.deepEqual(
          present.filter((name) => !listed.has(name)),
          [],
          `add these to the "Files" table of ${folder}/README.md`,
        );
      });
    });
  }

  it('lib/atls says up front that attestation runs inside the stream, not in the TLS handshake', function () {
    const readme = readFileSync(path.join(REPO_ROOT, 'lib/atls/README.md'), 'utf8');
    const opening = readme.split('\n## ')[0].split('```')[0];
    assert.match(opening.replace(/\s+/g, ' '), /inside the gRPC stream, not in the TLS handshake/);
  });
});
