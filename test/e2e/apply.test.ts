/**
 * `apply` on a real local cluster (the built CLI's private copy): from a fresh workspace with 1 + 2 counts to a
 * working cluster; then the worker count raised to 4 (two joined workers added) and lowered to 1 (the newest three
 * removed); then apply again changes nothing.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { editConfig } from '../../lib/config/edit.js';
import { cleanUp, copyBuiltCli, run, status, tempDir, type CliCopy } from './support.js';

describe('e2e: apply creates, initializes and scales a local cluster', function () {
  this.timeout(300_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  const counts = (workers: number) => ({ control_plane_default: 1, worker_default: workers });

  before(async () => {
    tmp = await tempDir('cl-apply-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('a fresh workspace with 1 + 2 counts becomes a working cluster', async () => {
    assert.equal((await run(copy, ws, ['config', 'generate', 'local'])).code, 0);
    await editConfig(ws, { initialCounts: counts(2) });
    const res = await run(copy, ws, ['apply', '-y']);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.match(res.stdout, /Created the cluster; initialized it\./);
    assert.deepEqual(
      (await status(copy, ws)).map((n) => [n.name, n.state]),
      [
        ['control-plane-0', 'joined'],
        ['worker-0', 'joined'],
        ['worker-1', 'joined'],
      ],
    );
    assert.equal((await run(copy, ws, ['verify', '--all'])).code, 0);
  });

  it('4 workers: apply adds two joined workers; 1 worker: apply removes the newest three; again: nothing changes', async () => {
    await editConfig(ws, { initialCounts: counts(4) });
    const up = await run(copy, ws, ['apply', '-y']);
    assert.equal(up.code, 0, up.stdout + up.stderr);
    assert.match(up.stdout, /Scaled worker_default 2 → 4\./);
    assert.deepEqual(
      (await status(copy, ws)).filter((n) => n.role === 'worker').map((n) => [n.name, n.state]),
      [
        ['worker-0', 'joined'],
        ['worker-1', 'joined'],
        ['worker-2', 'joined'],
        ['worker-3', 'joined'],
      ],
    );

    await editConfig(ws, { initialCounts: counts(1) });
    const down = await run(copy, ws, ['apply', '-y']);
    assert.equal(down.code, 0, down.stdout + down.stderr);
    assert.match(down.stdout, /Scaled worker_default 4 → 1\./);
    assert.deepEqual(
      (await status(copy, ws)).map((n) => n.name),
      ['control-plane-0', 'worker-0'],
    );

    const again = await run(copy, ws, ['apply', '-y']);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.match(again.stdout, /The cluster already is what the config says\./);
  });

  it('refuses a phase it does not know, naming the phases', async () => {
    const res = await run(copy, ws, ['apply', '--skip-phases', 'images']);
    assert.equal(res.code, 1);
    assert.match(
      res.stderr,
      /"images" is not a phase of apply\.[\s\S]*infrastructure, init, attestationconfig, image, k8s/,
    );
  });
});
