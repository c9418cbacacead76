/**
 * Day two on a real local cluster (the built CLI's private copy, real node processes with swtpm and gocryptfs):
 * verify, reboots that rejoin, every control plane rebooted and brought back by recover (a wrong master secret
 * first), a worker powered off and on, a changed image refused on rejoin, and status showing what runs where.
 * The cases share one cluster and run in order; each leaves every node joined for the next.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { BOOT_HISTORY_FILE } from '../../bootstrapper/node-setup.js';
import { MASTER_SECRET_FILE } from '../../lib/workspace/files.js';
import { nodePaths } from '../../providers/local/layout.js';
import { cleanUp, copyBuiltCli, run, status, tempDir, waitFor, type CliCopy } from './support.js';

const OTHER_KUBECONFIG = `apiVersion: v1
kind: Config
clusters:
- name: elsewhere
  cluster:
    server: https://elsewhere.example:6443
users:
- name: someone
  user:
    token: not-a-real-token
contexts:
- name: elsewhere
  context:
    cluster: elsewhere
    user: someone
current-context: elsewhere
`;

interface StatusNode {
  name: string;
  role: string;
  address: string;
  state: string;
  reason?: string;
  software?: {
    image: string;
    measurementsDigest: string;
    kubernetesVersion: string;
    microserviceVersion: string;
    attestationVariant: string;
  };
  upToDate?: boolean;
  lastAttestation?: { result: string; verifier: string };
}

describe('e2e: day two on a local cluster of 2 control planes + 2 workers', function () {
  this.timeout(180_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let kubeconfig: string;

  const fullStatus = async (): Promise<{
    expected: { measurementsDigest: string; kubernetesVersion: string };
    nodes: StatusNode[];
  }> => {
    const res = await run(copy, ws, ['status', '--json']);
    assert.equal(res.code, 0, res.stderr);
    return JSON.parse(res.stdout);
  };
  const node = async (name: string) => (await status(copy, ws)).find((n) => n.name === name);
  const allJoined = async () => (await status(copy, ws)).every((n) => n.state === 'joined');
  /** The boot history the node program keeps on its state disk, read through the node's own mount. */
  const bootHistory = async (name: string) =>
    (await fs.readFile(path.join(nodePaths(ws, name).stateDir, BOOT_HISTORY_FILE), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { how: string }).how);
  /** Every file of the node's encrypted state disk (ciphertext), to see that nothing changed. */
  const cipherTree = async (name: string) => {
    const dir = path.join(nodePaths(ws, name).stateDisk, 'cipher');
    const out: Record<string, string> = {};
    for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
      if (entry.isFile())
        out[path.relative(dir, path.join(entry.parentPath, entry.name))] = (
          await fs.readFile(path.join(entry.parentPath, entry.name))
        ).toString('hex');
    }
    return out;
  };

  before(async () => {
    tmp = await tempDir('cl-day2-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    // The user's kubeconfig already has a context of another cluster; the local cluster runs no Kubernetes, so
    // --merge-kubeconfig leaves it as it is.
    kubeconfig = path.join(tmp, 'kube', 'config');
    await fs.mkdir(path.dirname(kubeconfig));
    await fs.writeFile(kubeconfig, OTHER_KUBECONFIG);
    const res = await run(copy, ws, ['mini', 'up', '-c', '2', '-w', '2', '--merge-kubeconfig'], {
      KUBECONFIG: kubeconfig,
    });
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stdout, /Nothing was merged into your kubeconfig: the cluster runs no Kubernetes/);
  });

  it("--merge-kubeconfig left the user's kubeconfig untouched: no context may point to an API server that does not run", async () => {
    assert.equal(await fs.readFile(kubeconfig, 'utf8'), OTHER_KUBECONFIG);
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('status shows per node the image and its measurements digest, versions, up to date, and who attested it', async () => {
    const s = await fullStatus();
    assert.match(s.expected.measurementsDigest, /^[0-9a-f]{12}$/);
    for (const n of s.nodes) {
      assert.equal(n.software?.image, 'local', n.name);
      assert.equal(n.software?.measurementsDigest, s.expected.measurementsDigest, n.name);
      assert.equal(n.software?.kubernetesVersion, s.expected.kubernetesVersion, n.name);
      assert.equal(n.software?.attestationVariant, 'local-vtpm');
      assert.equal(n.upToDate, true, n.name);
      assert.equal(n.lastAttestation?.result, 'accepted');
    }
    // init reached one control plane through the load balancer; every other node joined through a join service.
    const verifiers = s.nodes.map((n) => n.lastAttestation?.verifier ?? '');
    assert.equal(verifiers.filter((v) => v === 'the CLI (init)').length, 1);
    assert.equal(verifiers.filter((v) => /^the join service at /.test(v)).length, 3);
    const text = await run(copy, ws, ['status']);
    assert.match(text.stdout, /4 of 4 nodes joined; 4 of 4 up to date with the config/);
  });

  it('verify --all: every node verified; --cluster-id of another cluster: exit 3, "belongs to another cluster"', async () => {
    const all = await run(copy, ws, ['verify', '--all', '-o', 'json']);
    assert.equal(all.code, 0, all.stdout + all.stderr);
    const result = JSON.parse(all.stdout) as { nodes: { node: string; outcome: string }[] };
    assert.deepEqual(
      result.nodes.map((n) => [n.node, n.outcome]),
      [
        ['control-plane-0', 'verified'],
        ['control-plane-1', 'verified'],
        ['worker-0', 'verified'],
        ['worker-1', 'verified'],
      ],
    );
    const other = await run(copy, ws, ['verify', '--all', '--cluster-id', randomBytes(32).toString('hex')]);
    assert.equal(other.code, 3);
    assert.equal(
      (other.stdout.match(/belongs to another cluster: PCR 15: expected [0-9a-f]{64}, got [0-9a-f]{64}/g) ?? []).length,
      4,
    );
  });

  it('a worker rebooted after its node program wrote to its state disk rejoins with the data intact, and verifies', async () => {
    const before = await bootHistory('worker-0');
    assert.deepEqual(before, ['join']);
    const reboot = await run(copy, ws, ['mini', 'reboot', 'worker-0']);
    assert.equal(reboot.code, 0, reboot.stderr);
    await waitFor('worker-0 to rejoin', async () => (await bootHistory('worker-0').catch(() => [])).length === 2);
    assert.deepEqual(
      await bootHistory('worker-0'),
      ['join', 'rejoin'],
      'the history written before the reboot is intact',
    );
    await waitFor('worker-0 joined', async () => (await node('worker-0'))?.state === 'joined');
    const verify = await run(copy, ws, ['verify', '-e', (await node('worker-0'))!.address]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    assert.match(verify.stdout, /worker-0\s+\S+\s+VERIFIED/);
  });

  it('every control plane rebooted (a worker too): they await recovery; a wrong master secret is refused by each and changes nothing; recover brings them back', async () => {
    const reboot = await run(copy, ws, ['mini', 'reboot', '--control-planes']);
    assert.equal(reboot.code, 0, reboot.stderr);
    assert.match(reboot.stdout, /Rebooted control-plane-0, control-plane-1\./);
    assert.equal((await run(copy, ws, ['mini', 'reboot', 'worker-1'])).code, 0);
    await waitFor('the control planes to await recovery', async () =>
      (await status(copy, ws)).filter((n) => n.role === 'control-plane').every((n) => n.state === 'awaiting-recovery'),
    );
    assert.equal((await node('worker-1'))?.state, 'waiting', 'a rebooted worker waits for a join service');
    // Each etcd member was stopped before the state disk it writes to was unmounted: none died writing to a gone disk.
    for (const name of ['control-plane-0', 'control-plane-1']) {
      const etcdLog = await fs.readFile(path.join(nodePaths(ws, name).dir, 'etcd.log'), 'utf8');
      assert.doesNotMatch(etcdLog, /"level":"fatal"/, `${name}'s etcd member died at the reboot`);
    }

    const secretFile = path.join(ws, MASTER_SECRET_FILE);
    const right = await fs.readFile(secretFile);
    const disks = {
      'control-plane-0': await cipherTree('control-plane-0'),
      'control-plane-1': await cipherTree('control-plane-1'),
    };
    await fs.writeFile(
      secretFile,
      JSON.stringify({ key: randomBytes(32).toString('base64'), salt: randomBytes(32).toString('base64') }),
    );
    try {
      const wrong = await run(copy, ws, ['recover']);
      assert.equal(wrong.code, 1);
      assert.match(wrong.stderr, /control-plane-0: The key does not unlock the state disk/);
      assert.match(wrong.stderr, /control-plane-1: The key does not unlock the state disk/);
      assert.match(wrong.stderr, /is not this cluster's: it does not give the cluster ID in the state/);
    } finally {
      await fs.writeFile(secretFile, right);
    }
    for (const [name, tree] of Object.entries(disks))
      assert.deepEqual(await cipherTree(name), tree, `${name}'s disk changed`);
    assert.ok(
      (await status(copy, ws)).filter((n) => n.role === 'control-plane').every((n) => n.state === 'awaiting-recovery'),
      'the nodes keep waiting',
    );

    const recover = await run(copy, ws, ['recover']);
    assert.equal(recover.code, 0, recover.stdout + recover.stderr);
    assert.match(recover.stdout, /^recovered control-plane-0$/m);
    assert.match(recover.stdout, /^recovered control-plane-1$/m);
    await waitFor('every node to be back', allJoined);
    const histories = await Promise.all(['control-plane-0', 'control-plane-1'].map(bootHistory));
    assert.deepEqual(histories.map((h) => h[1]).sort(), ['recover', 'recover']);
    assert.deepEqual(
      histories.map((h) => h[0]).sort(),
      ['init', 'join'],
      'the history written before the reboot is intact',
    );
    assert.deepEqual(await bootHistory('worker-1'), ['join', 'rejoin']);
    assert.equal((await run(copy, ws, ['verify', '--all'])).code, 0);
    const again = await run(copy, ws, ['recover']);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /No node needed recovery/);
  });

  it('a worker powered off is stopped; powered on, it rejoins', async () => {
    assert.equal((await run(copy, ws, ['mini', 'stop', 'worker-1'])).code, 0);
    assert.equal((await node('worker-1'))?.state, 'stopped');
    assert.equal((await run(copy, ws, ['mini', 'start', 'worker-1'])).code, 0);
    await waitFor('worker-1 to rejoin', async () => (await node('worker-1'))?.state === 'joined');
    assert.deepEqual(await bootHistory('worker-1'), ['join', 'rejoin', 'rejoin']);
  });

  it('a node whose image changed before its reboot is refused on rejoin, and verify -e names the PCR', async () => {
    const file = copy.entry;
    const original = await fs.readFile(file);
    await fs.appendFile(file, '// changed before the reboot\n');
    try {
      assert.equal((await run(copy, ws, ['mini', 'reboot', 'worker-0'])).code, 0);
      const refused = await waitFor('worker-0 to be refused', async () => {
        const n = await node('worker-0');
        return n?.state === 'refused' ? n : undefined;
      });
      assert.match(refused.reason ?? '', /PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
      const verify = await run(copy, ws, ['verify', '-e', refused.address]);
      assert.equal(verify.code, 3);
      assert.match(verify.stdout, /PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64} \(enforced\)/);
      const s = await fullStatus();
      assert.equal(
        s.nodes.find((n) => n.name === 'worker-0')?.upToDate,
        false,
        'its measurements digest differs from the config',
      );
    } finally {
      await fs.writeFile(file, original);
    }
  });
});
