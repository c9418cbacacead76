/** The cluster commands as a user runs them (built CLI, no terminal): the answers that need no cluster. */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { runCli } from '../support/cli.js';
import { tempDir } from './support/workspace.js';

describe('cluster commands without a cluster', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await tempDir('cl-cmd-');
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });
  const cli = (...args: string[]) => runCli([...args, '-C', ws]);

  it('terminate and mini down destroy nothing without -y when there is no terminal', async () => {
    // A workspace with a cluster identity (else both refuse at once: there is nothing to terminate).
    assert.equal((await cli('config', 'generate', 'local')).code, 0);
    const state = path.join(ws, 'constellation-state.yaml');
    await fs.writeFile(state, (await fs.readFile(state, 'utf8')).replace(/uid: ""/, 'uid: "0123abcd"'));
    for (const args of [['terminate'], ['mini', 'down']]) {
      const res = await cli(...args);
      assert.equal(res.code, 1, args.join(' '));
      assert.match(res.stderr, /Hint: Pass -y \(--yes\)/);
    }
  });

  it('create and init say what is missing and what to run', async () => {
    const create = await cli('create');
    assert.equal(create.code, 1);
    assert.match(create.stderr, /constellation-conf\.yaml/);
    assert.equal((await cli('config', 'generate', 'local')).code, 0);
    const init = await cli('init');
    assert.equal(init.code, 1);
    assert.match(init.stderr, /no cluster yet[\s\S]*Hint: Run `constellation create` first/);
  });

  it('status of a workspace without nodes, as text and as JSON', async () => {
    assert.equal((await cli('config', 'generate', 'local')).code, 0);
    const text = await cli('status');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /no nodes/);
    const json = await cli('status', '--json');
    const parsed = JSON.parse(json.stdout);
    assert.deepEqual(parsed.nodes, []);
    assert.equal(parsed.expected.image, 'local');
    assert.equal(parsed.expected.attestationVariant, 'local-vtpm');
  });

  it('mini down refuses a cloud workspace; mini up refuses it too', async () => {
    assert.equal((await cli('config', 'generate', 'gcp')).code, 0);
    const down = await cli('mini', 'down', '-y');
    assert.equal(down.code, 1);
    assert.match(down.stderr, /holds a gcp cluster; mini down removes local clusters only/);
    const up = await cli('mini', 'up');
    assert.equal(up.code, 1);
    assert.match(up.stderr, /mini up runs local clusters only/);
    assert.ok(await fs.access(`${ws}/constellation-conf.yaml`).then(() => true), 'nothing was removed');
  });
});
