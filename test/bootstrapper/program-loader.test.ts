import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleLoader } from '../../bootstrapper/program-loader.js';
import { pinnedNodeBinary } from '../../lib/node-image/build/defaults.js';
import { NODE_PROGRAM_DIR } from '../support/built-image.js';

const ENTRY = path.join(NODE_PROGRAM_DIR, 'main.cjs');

/** Runs `script` (CommonJS) in the Node.js binary the images run; returns its stdout. */
async function inPinnedNode(script: string): Promise<string> {
  const { binary } = await pinnedNodeBinary();
  const res = spawnSync(binary, ['-e', script], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  assert.equal(res.status, 0, res.stderr);
  return res.stdout;
}

describe("the node program's loader and its code caches (bootstrapper/program-loader.ts, `npm run build`)", function () {
  this.timeout(60_000);
  let dir: string;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'program-loader-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('the entry starts the node when run, and exports main() for the local launcher, which imports it (providers/local/launcher.ts)', async () => {
    assert.equal(
      (await inPinnedNode(`console.log(typeof require(${JSON.stringify(ENTRY)}).main);`)).trim(),
      'function',
    );
  });

  it("the build's caches are accepted by the images' Node.js, and making them again gives the same bytes", async () => {
    const load = `const l = require(${JSON.stringify(ENTRY)}).bundleLoader(${JSON.stringify(NODE_PROGRAM_DIR)}); l.load('program.cjs'); console.log(l.rejected());`;
    assert.equal((await inPinnedNode(load)).trim(), '0');
    // Made again in another folder, as the build makes them (one process, the same files in the same order).
    const cached = (await fs.readdir(NODE_PROGRAM_DIR))
      .filter((f) => f.endsWith('.cache'))
      .map((f) => f.slice(0, -'.cache'.length))
      .sort();
    assert.ok(cached.includes('program.cjs'));
    for (const f of ['main.cjs', ...cached]) await fs.copyFile(path.join(NODE_PROGRAM_DIR, f), path.join(dir, f));
    // The build's command line (scripts/bundle-node-program.mjs, makeCodeCaches).
    const { binary } = await pinnedNodeBinary();
    const res = spawnSync(
      binary,
      ['--random-seed=1', path.join(dir, 'main.cjs'), '--make-code-caches', dir, ...cached],
      { encoding: 'utf8', env: { PATH: process.env.PATH } },
    );
    assert.equal(res.status, 0, res.stderr);
    for (const f of cached) {
      const [again, built] = await Promise.all(
        [dir, NODE_PROGRAM_DIR].map((d) => fs.readFile(path.join(d, `${f}.cache`))),
      );
      assert.ok(again!.equals(built!), `${f}.cache differs from the build's`);
    }
  });

  it('runs each file once, serves chunk requires itself, and compiles a file whose cache V8 rejects from its source', async () => {
    await fs.writeFile(
      path.join(dir, 'program.cjs'),
      'const a = require("./chunk-A.cjs"); exports.answer = a.x + require("./chunk-A.cjs").x; exports.url = __importMetaUrl;',
    );
    await fs.writeFile(
      path.join(dir, 'chunk-A.cjs'),
      'globalThis.__loaderRuns = (globalThis.__loaderRuns ?? 0) + 1; exports.x = 21;',
    );
    // A cache of other bytes: V8 checks its header and rejects it.
    await fs.writeFile(path.join(dir, 'chunk-A.cjs.cache'), Buffer.alloc(64, 7));
    const loaded = bundleLoader(dir);
    const program = loaded.load('program.cjs');
    assert.equal(program.answer, 42);
    assert.equal(program.url, `file://${path.join(dir, 'program.cjs')}`);
    assert.equal((globalThis as { __loaderRuns?: number }).__loaderRuns, 1);
    assert.equal(loaded.rejected(), 1);
    delete (globalThis as { __loaderRuns?: number }).__loaderRuns;
  });
});
