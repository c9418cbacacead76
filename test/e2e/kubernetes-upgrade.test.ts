/**
 * An in-place Kubernetes upgrade on a real local cluster (3 control planes + 1 worker, backend none; the built
 * CLI's private copy): the config's kubernetesVersion goes up one minor version and `upgrade apply -y` first has
 * the control planes upgrade in place (one claims the cluster-wide step through the cluster store, the others
 * follow), then replaces the worker; the control planes are not replaced and keep the version across a reboot.
 * A downgrade is refused before anything changes.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { getNodeStatus, VERIFY_PORT } from '../../cli/cluster/status.js';
import { UPGRADE_JOURNAL_FILE } from '../../cli/cluster/upgrade.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { cleanUp, copyBuiltCli, run, status, tempDir, waitFor, type CliCopy } from './support.js';

interface NodeJson {
  name: string;
  role: string;
  address: string;
  state: string;
  upToDate?: boolean;
  software?: { kubernetesVersion: string };
}

describe('e2e: in-place Kubernetes upgrade of the control planes, then replacement of the workers', function () {
  this.timeout(300_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;

  const setKubernetesVersion = async (version: string) => {
    const file = path.join(ws, CONFIG_FILE);
    const text = await fs.readFile(file, 'utf8');
    assert.match(text, /^kubernetesVersion: v\d+\.\d+\.\d+$/m);
    await fs.writeFile(file, text.replace(/^kubernetesVersion: .*$/m, `kubernetesVersion: ${version}`));
  };
  /**
   * Each node as `status` lists it, with the Kubernetes version the node itself reports: `status` shows none for the
   * `none` backend (it runs no Kubernetes), whose nodes still record the version the upgrade moved them to.
   */
  const nodes = async () => {
    const listed = (JSON.parse((await run(copy, ws, ['status', '--json'])).stdout) as { nodes: NodeJson[] }).nodes;
    return Promise.all(
      listed.map(async (n) => {
        if (!n.software) return n;
        const own = await getNodeStatus(`${n.address}:${VERIFY_PORT}`, 3000).catch(() => undefined);
        return { ...n, software: { kubernetesVersion: own?.kubernetesVersion ?? '' } };
      }),
    );
  };

  before(async () => {
    tmp = await tempDir('cl-k8s-upgrade-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    // Three control planes: one can reboot while etcd keeps its quorum.
    const res = await run(copy, ws, ['mini', 'up', '-c', '3', '-w', '1']);
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('v1.32 → v1.33: every control plane upgrades in place before the worker is replaced; a rebooted control plane keeps the version', async () => {
    assert.deepEqual(
      (await nodes()).map((n) => [n.name, n.software?.kubernetesVersion]),
      [
        ['control-plane-0', 'v1.32.10'],
        ['control-plane-1', 'v1.32.10'],
        ['control-plane-2', 'v1.32.10'],
        ['worker-0', 'v1.32.10'],
      ],
    );
    await setKubernetesVersion('v1.33.6');
    const res = await run(copy, ws, ['upgrade', 'apply', '-y']);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    const out = res.stdout;
    assert.match(out, /Kubernetes v1\.32\.10 → v1\.33\.6: in place on the control planes first/);
    assert.match(out, /Nodes to replace, one at a time \(1\):\n {2}worker-0 \(worker\)/, 'only the worker is replaced');
    const upgraded = ['control-plane-0', 'control-plane-1', 'control-plane-2'].map((name) =>
      out.search(new RegExp(`${name} runs Kubernetes v1\\.33\\.6`)),
    );
    const firstReplacement = out.indexOf('adding a node to worker_default to replace worker-0');
    assert.ok(
      upgraded.every((at) => at >= 0),
      out,
    );
    assert.ok(
      upgraded.every((at) => at < firstReplacement),
      `every control plane runs v1.33.6 before the first replacement starts:\n${out}`,
    );
    assert.match(out, /\(it ran the cluster-wide upgrade\)/);

    const after = await nodes();
    assert.deepEqual(
      after.map((n) => [n.name, n.state, n.software?.kubernetesVersion, n.upToDate]),
      [
        ['control-plane-0', 'joined', 'v1.33.6', true],
        ['control-plane-1', 'joined', 'v1.33.6', true],
        ['control-plane-2', 'joined', 'v1.33.6', true],
        ['worker-1', 'joined', 'v1.33.6', true],
      ],
    );
    await assert.rejects(fs.stat(path.join(ws, UPGRADE_JOURNAL_FILE)), { code: 'ENOENT' });

    assert.equal((await run(copy, ws, ['mini', 'reboot', 'control-plane-1'])).code, 0);
    const rebooted = await waitFor(
      'control-plane-1 to rejoin',
      async () => (await nodes()).find((n) => n.name === 'control-plane-1' && n.state === 'joined'),
      90_000,
    );
    assert.equal(rebooted.software?.kubernetesVersion, 'v1.33.6', 'the version is kept on its state disk');
  });

  it('a downgrade is refused before anything changes, naming both versions', async () => {
    await setKubernetesVersion('v1.32.10');
    const res = await run(copy, ws, ['upgrade', 'apply', '-y']);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(
      res.stderr,
      /Kubernetes cannot go from v1\.33\.6 down to v1\.32\.10: kubeadm does not downgrade a cluster\./,
    );
    await assert.rejects(fs.stat(path.join(ws, UPGRADE_JOURNAL_FILE)), { code: 'ENOENT' });
    assert.deepEqual(
      (await status(copy, ws)).map((n) => [n.name, n.state]),
      [
        ['control-plane-0', 'joined'],
        ['control-plane-1', 'joined'],
        ['control-plane-2', 'joined'],
        ['worker-1', 'joined'],
      ],
    );
  });
});
