/**
 * `mini up --vm` end to end, on real VMs (QEMU + OVMF + swtpm, TCG here): one cluster of 1 control plane and 1
 * worker that boots the shared built qemu image (test/support/built-image.ts) and goes through its life in order:
 * up (both nodes join), verify (PCR 4, 9 and 11 of every node are `image measure` of the image), the state disks
 * (LUKS2, formatted and opened inside the guest; only ciphertext on the host), a worker reset (it rejoins with its
 * data), a reset of every control plane (it waits; `recover` brings it back), and terminate (no process, namespace, tap device or disk file left). One cluster for all, because each VM
 * boot costs minutes here; each `it` checks one thing and names it. A second, one-node cluster boots a disk whose
 * initrd differs from the one its signed measurements describe (an attacker's swap) and is refused.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clusterPaths } from '../../providers/local/layout.js';
import { findOwnedProcesses } from '../../providers/local/processes.js';
import { ClusterNetwork, NETNS_DIR } from '../../providers/local/network.js';
import { ClusterFile } from '../../providers/local/cluster-file.js';
import { buildNodeImage } from '../../lib/node-image/build/index.js';
import { defaultBuildDeps, pinnedNodeBinary } from '../../lib/node-image/build/defaults.js';
import { builtQemuImage, missingPackages, NODE_PROGRAM_DIR, type BuiltTestImage } from '../support/built-image.js';
import { runCli, type CliResult } from '../support/cli.js';

interface VerifyJson {
  nodes: { node: string; outcome: string; reason?: string; pcrs?: Record<string, string> }[];
}

describe('mini up --vm: a cluster of QEMU VMs that boot the node image (TCG)', function () {
  this.timeout(45 * 60_000);
  let image: BuiltTestImage;
  let ws: string;
  let netId: string | undefined;
  const cli = (args: string[]): Promise<CliResult> => runCli([...args, '-C', ws], { cwd: ws, env: { XDG_CONFIG_HOME: image.configHome } });
  const nodeLog = (name: string) => fs.readFile(path.join(clusterPaths(ws).nodesDir, name, 'node.log'), 'latin1');

  before(async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      if (process.env.CI === 'true') throw new Error(`the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\``);
      this.skip();
    }
    image = await builtQemuImage();
    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-cluster-'));
  });

  after(async function () {
    if (!ws) return;
    const paths = clusterPaths(ws);
    netId ??= (await ClusterFile.load(paths).catch(() => undefined))?.record.netId;
    await cli(['terminate', '-y']).catch(() => undefined);
    for (const pid of await findOwnedProcesses(paths.dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (netId) await new ClusterNetwork(netId).remove().catch(() => undefined);
    await fs.rm(ws, { recursive: true, force: true });
  });

  it('mini up --vm -c 1 -w 1 boots both VMs, and both join', async () => {
    const res = await cli(['mini', 'up', '--vm', '--image', image.dir, '-c', '1', '-w', '1', '-y']);
    assert.equal(res.code, 0, `mini up --vm failed:\n${res.stderr}\n${res.stdout}`);
    assert.match(res.stdout, /2 nodes joined/);
    assert.match(res.stdout, /booting VM control-plane-0 \((TCG|KVM): /, 'mini up says which accelerator runs the VM');
    netId = (await ClusterFile.load(clusterPaths(ws)))?.record.netId;
  });

  it('verify --all: every node VERIFIED, with PCR 4, 9 and 11 equal to `image measure` of the image', async () => {
    const measured = await runCli(['image', 'measure', image.rawDisk, '--json']);
    assert.equal(measured.code, 0, measured.stderr);
    const predicted = (JSON.parse(measured.stdout) as { pcrs: Record<string, string> }).pcrs;
    const res = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(res.code, 0, `verify failed:\n${res.stderr}\n${res.stdout}`);
    const { nodes } = JSON.parse(res.stdout) as VerifyJson;
    assert.deepEqual(nodes.map((n) => n.node).sort(), ['control-plane-0', 'worker-0']);
    for (const node of nodes) {
      assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
      for (const pcr of ['4', '9', '11']) assert.equal(node.pcrs?.[pcr], predicted[pcr], `${node.node} PCR ${pcr}`);
    }
  });

  it("each node formatted its state disk as LUKS2 inside the guest: the node's log says so, the host file holds a LUKS2 header", async () => {
    for (const name of ['control-plane-0', 'worker-0']) {
      assert.match(await nodeLog(name), /"state disk formatted"/, `${name}'s log`);
      const disk = await fs.open(path.join(clusterPaths(ws).nodesDir, name, 'state.raw'), 'r');
      try {
        const header = Buffer.alloc(8);
        await disk.read(header, 0, 8, 0);
        assert.deepEqual([...header.subarray(0, 6)], [0x4c, 0x55, 0x4b, 0x53, 0xba, 0xbe], `${name}: LUKS magic`);
        assert.equal(header.readUInt16BE(6), 2, `${name}: LUKS version 2`);
      } finally {
        await disk.close();
      }
    }
  });

  it('mini reboot worker-0 resets the VM (QMP system_reset): it boots again, rejoins with its disk, and verifies', async () => {
    const before = (await nodeLog('worker-0')).split('CONSTELLATION-BOOT end').length;
    const res = await cli(['mini', 'reboot', 'worker-0']);
    assert.equal(res.code, 0, res.stderr);
    const deadline = Date.now() + 20 * 60_000;
    for (;;) {
      const log = await nodeLog('worker-0');
      if (log.split('CONSTELLATION-BOOT end').length > before && /"state disk unlocked"/.test(log)) break;
      assert.ok(Date.now() < deadline, 'worker-0 did not boot again and unlock its state disk');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const verified = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(verified.code, 0, verified.stderr);
    for (const node of (JSON.parse(verified.stdout) as VerifyJson).nodes) assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
  });

  it('mini reboot of every control plane: it waits for recovery, `recover` brings it back, verify --all OK', async () => {
    const boots = (await nodeLog('control-plane-0')).split('CONSTELLATION-BOOT end').length;
    const res = await cli(['mini', 'reboot', 'control-plane-0']);
    assert.equal(res.code, 0, res.stderr);
    const deadline = Date.now() + 20 * 60_000;
    for (;;) {
      const log = await nodeLog('control-plane-0');
      if (log.split('CONSTELLATION-BOOT end').length > boots && /"bootstrapper started"/.test(log.slice(log.lastIndexOf('CONSTELLATION-BOOT end')))) break;
      assert.ok(Date.now() < deadline, 'control-plane-0 did not boot again');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const recovered = await cli(['recover']);
    assert.equal(recovered.code, 0, `recover failed:\n${recovered.stderr}\n${recovered.stdout}`);
    assert.match(await nodeLog('control-plane-0'), /"recovered: state disk unlocked with the master secret from the CLI"/);
    const verified = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(verified.code, 0, verified.stderr);
    for (const node of (JSON.parse(verified.stdout) as VerifyJson).nodes) assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
  });

  it('terminate leaves no process, namespace, tap device or disk file', async () => {
    const paths = clusterPaths(ws);
    const res = await cli(['terminate', '-y']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(await findOwnedProcesses(paths.dir), []);
    const namespaces = (await fs.readdir(NETNS_DIR).catch(() => [] as string[])).filter((n) => netId && n.includes(netId));
    assert.deepEqual(namespaces, [], 'namespaces of the cluster (and the tap devices inside them)');
    assert.equal(await fs.stat(paths.dir).catch(() => undefined), undefined, 'the cluster folder with the disks');
    assert.equal(await fs.stat(paths.runtimeDir).catch(() => undefined), undefined, 'the runtime folder with the QMP sockets');
  });
});

describe('mini up --vm on a disk whose initrd changed after its measurements were signed', function () {
  this.timeout(45 * 60_000);
  let work: string | undefined;
  let ws: string | undefined;

  after(async function () {
    if (ws) {
      const paths = clusterPaths(ws);
      const netId = (await ClusterFile.load(paths).catch(() => undefined))?.record.netId;
      await runCli(['terminate', '-y', '-C', ws], { cwd: ws }).catch(() => undefined);
      for (const pid of await findOwnedProcesses(paths.dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      if (netId) await new ClusterNetwork(netId).remove().catch(() => undefined);
      await fs.rm(ws, { recursive: true, force: true });
    }
    if (work) await fs.rm(work, { recursive: true, force: true });
  });

  it('the node is refused at init and gets nothing; verify -e names PCR 9 and 11', async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      if (process.env.CI === 'true') throw new Error(`the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\``);
      this.skip();
    }
    const image = await builtQemuImage();
    work = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-swapped-'));
    // The other disk: the same build with one more line in the node program, so only the initrd differs.
    const program = path.join(work, 'node-program');
    await fs.cp(NODE_PROGRAM_DIR, program, { recursive: true });
    await fs.appendFile(path.join(program, 'main.mjs'), '// changed after measuring\n');
    const other = path.join(work, 'other');
    const built = await buildNodeImage(
      { provider: 'qemu', outDir: other, version: 'v0.0.1-test', packageCache: image.packageCache, nodeProgramDir: program, node: await pinnedNodeBinary(), download: false },
      defaultBuildDeps(undefined, path.join(work, 'other-key')),
    );
    // The attacker's folder: that disk under the image's genuine signed measurements.
    const swapped = path.join(work, 'swapped');
    await fs.mkdir(swapped);
    await fs.copyFile(built.rawDisk, path.join(swapped, path.basename(image.rawDisk)));
    for (const file of ['measurements.json', 'measurements.json.sig', 'manifest.json']) await fs.copyFile(path.join(image.dir, file), path.join(swapped, file));

    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-refused-'));
    const env = { XDG_CONFIG_HOME: image.configHome };
    const up = await runCli(['mini', 'up', '--vm', '--image', swapped, '-c', '1', '-w', '0', '-y', '-C', ws], { cwd: ws, env });
    assert.notEqual(up.code, 0, up.stdout);
    assert.match(up.stderr, /PCR 9\b/);
    assert.match(up.stderr, /PCR 11\b/);
    const log = await fs.readFile(path.join(clusterPaths(ws).nodesDir, 'control-plane-0', 'node.log'), 'latin1');
    assert.doesNotMatch(log, /"state disk formatted"|extended PCR 15/, 'the refused node got no secret');

    const record = (await ClusterFile.load(clusterPaths(ws)))!.record;
    const address = `${record.prefix}.${record.nodes['control-plane-0']!.host}`;
    const verify = await runCli(['verify', '-e', address, '--cluster-id', '0'.repeat(64), '-C', ws], { cwd: ws, env });
    assert.notEqual(verify.code, 0);
    assert.match(`${verify.stdout}${verify.stderr}`, /PCR 9\b/);
    assert.match(`${verify.stdout}${verify.stderr}`, /PCR 11\b/);
  });
});
