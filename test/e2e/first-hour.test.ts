/**
 * The first hour on a real local cluster (the built CLI's private copy, ./support.ts, at a path of 160 characters
 * as in a clone at that depth): a workspace whose path is 200 characters long (the TPM sockets live in the short
 * runtime folder, not in the workspace), what a cluster
 * without Kubernetes shows, `verify -e … --cluster-id` from a folder that holds only the config, `verify -o raw`
 * checked again by `attestation verify`, and Ctrl-C during mini up. Every cluster is removed in `after`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ADMIN_CONF_FILE, CONFIG_FILE } from '../../lib/workspace/files.js';
import { readState } from '../../lib/workspace/state.js';
import { clusterPaths, nodePaths, RUNTIME_ROOT } from '../../providers/local/layout.js';
import { cleanUp, clusterProcesses, copyBuiltCli, exists, run, tempDir, type CliCopy } from './support.js';

describe('the first hour (a real local cluster)', function () {
  this.timeout(240_000);
  let tmp: string;
  let copy: CliCopy;
  const workspaces: string[] = [];

  before(async () => {
    tmp = await tempDir('cl-first-hour-');
    // The README's quick start runs from a clone at any depth: the CLI (bin/, dist/ with the node program) lives at
    // a 160-character path here. node_modules is a link to the repository's, which Node resolves to its real path.
    copy = await copyBuiltCli(pathOfLength(path.join(tmp, 'c'), 160 - '/cli'.length));
    assert.equal(copy.root.length, 160);
  });
  after(async () => {
    for (const ws of workspaces) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  /** A path of exactly `length` characters that starts with `base` (not made yet). */
  function pathOfLength(base: string, length: number): string {
    let out = base;
    while (length - out.length >= 2) out = path.join(out, 'd'.repeat(Math.min(60, length - out.length - 1)));
    if (out.length < length) out += 'd';
    assert.equal(out.length, length);
    return out;
  }

  /** A workspace path of exactly `length` characters below the test's folder (not made yet). */
  function workspaceOfLength(length: number): string {
    const ws = pathOfLength(path.join(tmp, 'w'), length);
    workspaces.push(ws);
    return ws;
  }

  describe('a cluster in a workspace whose path has 200 characters, from a CLI whose path has 160', () => {
    let ws: string;
    before(async () => {
      ws = workspaceOfLength(200);
      await fs.mkdir(ws, { recursive: true });
      const res = await run(copy, ws, ['mini', 'up']);
      assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    });

    it("comes up, with each node's TPM sockets in the cluster's runtime folder", async () => {
      const status = await run(copy, ws, ['status']);
      assert.match(status.stdout, /2 of 2 nodes joined/);
      const runtime = clusterPaths(ws).runtimeDir;
      assert.ok(runtime.startsWith(`${RUNTIME_ROOT}/`));
      for (const node of ['control-plane-0', 'worker-0']) {
        const launch = JSON.parse(await fs.readFile(nodePaths(ws, node).launchConfig, 'utf8')) as {
          tpm: { ctrlSocket: string };
        };
        assert.equal(launch.tpm.ctrlSocket, path.join(runtime, node, 'swtpm.sock.ctrl'));
        assert.ok(Buffer.byteLength(launch.tpm.ctrlSocket) <= 107, 'fits a unix socket address');
        assert.ok(await exists(launch.tpm.ctrlSocket), node);
      }
    });

    it('shows no Kubernetes version and writes no kubeconfig: the nodes run no API server (backend none)', async () => {
      const status = await run(copy, ws, ['status']);
      assert.match(status.stdout, /Kubernetes none \(kubernetesBackend: none\)/);
      assert.match(status.stdout, /control-plane-0\s+control-plane\s+\S+\s+joined\s+\S+\s+-\s+yes/);
      assert.equal(await exists(path.join(ws, ADMIN_CONF_FILE)), false);
    });

    it('verify -e <node> --cluster-id <id> verifies the node from a folder that holds only the config (the documented use)', async () => {
      const other = path.join(tmp, 'verifier');
      await fs.mkdir(other);
      await fs.copyFile(path.join(ws, CONFIG_FILE), path.join(other, CONFIG_FILE));
      const { clusterValues } = await readState(ws);
      const address = /worker-0\s+worker\s+(\S+)/.exec((await run(copy, ws, ['status'])).stdout)?.[1];
      assert.ok(address);
      const res = await run(copy, other, ['verify', '-e', address, '--cluster-id', clusterValues.clusterID]);
      assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
      assert.match(res.stdout, /worker-0\s+\S+\s+VERIFIED/);
    });

    it('verify -o raw prints a document with its nonce, and attestation verify accepts the saved line', async () => {
      const res = await run(copy, ws, ['verify', '-o', 'raw']);
      assert.equal(res.code, 0, res.stderr);
      const line = res.stdout.trim().split('\n')[0];
      assert.match((JSON.parse(line) as { nonce: string }).nonce, /^[0-9a-f]{64}$/);
      const file = path.join(tmp, 'node.json');
      await fs.writeFile(file, line);
      const check = await run(copy, ws, ['attestation', 'verify', file]);
      assert.equal(check.code, 0, `${check.stdout}\n${check.stderr}`);
      assert.match(check.stdout, /Verdict: ACCEPTED/);
    });

    it('mini down removes the cluster and its runtime folder', async () => {
      const runtime = clusterPaths(ws).runtimeDir;
      const res = await run(copy, ws, ['mini', 'down', '-y']);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(await exists(runtime), false);
      assert.deepEqual(await clusterProcesses(ws), []);
    });
  });

  it('Ctrl-C while mini up creates the nodes exits with 130 and says to run it again, and mini up again finishes the cluster', async () => {
    const ws = path.join(tmp, 'interrupted');
    workspaces.push(ws);
    await fs.mkdir(ws);
    // As a terminal's Ctrl-C: SIGINT to the whole foreground process group.
    const child = spawn(process.execPath, [copy.cli, 'mini', 'up', '-C', ws], {
      cwd: tmp,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let interrupted = false;
    // Interrupt once the CLI says it creates the nodes, not after a fixed time: on a loaded machine the CLI's own
    // start-up can take longer than any fixed delay, and a signal before its handlers exist proves nothing.
    const onOutput = (chunk: Buffer) => {
      output += chunk.toString();
      if (!interrupted && output.includes('Creating the local nodes')) {
        interrupted = true;
        process.kill(-(child.pid as number), 'SIGINT');
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    assert.ok(interrupted, `mini up ended before it created the nodes:\n${output}`);
    assert.equal(code, 130, output);
    assert.match(output, /Interrupted; run the same command again to continue\. \(constellation mini up -C \S+\)/);

    const again = await run(copy, ws, ['mini', 'up', '-y']);
    assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stdout, /is up: 2 nodes joined/);
    const down = await run(copy, ws, ['mini', 'down', '-y']);
    assert.equal(down.code, 0, down.stderr);
  });
});
