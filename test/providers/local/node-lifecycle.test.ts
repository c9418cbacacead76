/**
 * A local node's lifecycle (providers/local/node-lifecycle.ts) over a NodeMachine of the test's: what the lifecycle
 * does itself for process and VM nodes alike (records, registration, when a machine and its TPM start or stop), without
 * swtpm, QEMU or a network namespace. The fake machine's TPM and machine are real detached processes with the node's
 * owner mark (./fixtures/detached-child.ts), so "runs" means what it means for a real node.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeRegistration } from '../../../providers/local/metadata-server.js';
import { ClusterFile } from '../../../providers/local/cluster-file.js';
import { clusterPaths, nodePaths, type NodePaths } from '../../../providers/local/layout.js';
import { newNetworkId } from '../../../providers/local/network.js';
import {
  LocalNodeLifecycle,
  type MachineNode,
  type NodeMachine,
  type NodeRegistry,
} from '../../../providers/local/node-lifecycle.js';
import { isAlive, spawnDetached } from '../../../providers/local/processes.js';
import { killLeftovers, tempDir, testContext } from './support.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'detached-child.ts');
const NODE = 'worker-0';

/** A machine whose TPM and machine are stand-in processes; it counts what the lifecycle asked of it. */
class FakeMachine implements NodeMachine {
  calls: string[] = [];
  /** The next start reports a failed boot. */
  failNextStart = false;
  readonly tpmStopsWithMachine: boolean;

  constructor(options: { tpmStopsWithMachine: boolean }) {
    this.tpmStopsWithMachine = options.tpmStopsWithMachine;
  }

  async requireImage(): Promise<void> {}

  async startTpm(np: NodePaths, options: { readAk: boolean }): Promise<{ pid: number; akPublic?: string }> {
    this.calls.push(options.readAk ? 'startTpm+ak' : 'startTpm');
    const { pid } = await spawnDetached({
      file: CHILD,
      args: ['ready'],
      owner: np.dir,
      cwd: np.dir,
      logFile: path.join(np.dir, 'tpm.log'),
    });
    // The lifecycle tells a running TPM by its control socket, as for swtpm.
    await fs.mkdir(np.socketDir, { recursive: true });
    await fs.writeFile(path.join(np.socketDir, 'swtpm.sock.ctrl'), '');
    return { pid, ...(options.readAk ? { akPublic: Buffer.from('ak of the fake').toString('base64') } : {}) };
  }

  async plug(): Promise<void> {
    this.calls.push('plug');
  }

  async start(target: MachineNode): Promise<{ pid: number; failure?: Error }> {
    this.calls.push('start');
    const fail = this.failNextStart;
    this.failNextStart = false;
    const np = target.paths;
    const { pid } = await spawnDetached({
      file: CHILD,
      args: [fail ? 'fail' : 'ready'],
      owner: np.dir,
      cwd: np.dir,
      logFile: np.log,
    });
    return fail ? { pid, failure: new Error('the node did not boot') } : { pid };
  }
}

class FakeRegistry implements NodeRegistry {
  registered = new Map<string, NodeRegistration>();
  async registerNode(name: string, registration: NodeRegistration): Promise<void> {
    this.registered.set(name, registration);
  }
  async unregisterNode(name: string): Promise<void> {
    this.registered.delete(name);
  }
}

describe("local provider: a node's lifecycle over its machine", function () {
  this.timeout(30_000);
  let tmp: string;
  let ws: string;
  let ctx: ReturnType<typeof testContext>;
  let file: ClusterFile;
  let registry: FakeRegistry;

  beforeEach(async () => {
    tmp = await tempDir('cl-lifecycle-');
    ws = path.join(tmp, 'ws');
    await fs.mkdir(clusterPaths(ws).nodesDir, { recursive: true });
    ctx = testContext(ws);
    registry = new FakeRegistry();
    file = await ClusterFile.create(clusterPaths(ws), {
      version: 1,
      uid: 'a1b2c3d4',
      name: 'test',
      netId: newNetworkId(),
      prefix: '10.213.7',
      metadataPort: 8080,
      initSecretHash: '',
      joinServiceKey: '',
      initialized: false,
      kubernetesBackend: 'none',
      nodeGroups: { worker_default: { role: 'worker', stateDiskSizeGB: 1, count: 1 } },
      nextNodeIndex: { worker: 1 },
      nodes: { [NODE]: { group: 'worker_default', role: 'worker', host: 100, image: 'local' } },
    });
  });

  afterEach(async () => {
    await killLeftovers(ws);
    await fs.rm(nodePaths(ws, NODE).socketDir, { recursive: true, force: true });
    await fs.rm(clusterPaths(ws).runtimeDir, { recursive: true, force: true });
    await fs.rm(tmp, { recursive: true, force: true });
  });

  const node = () => file.record.nodes[NODE];

  it('prepares a node once: its TPM starts and its AK is read before the first boot, and not again', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: false });
    const lifecycle = new LocalNodeLifecycle(machine);
    await lifecycle.prepare(file, NODE, ctx);
    await lifecycle.prepare(file, NODE, ctx);
    assert.deepEqual(machine.calls, ['startTpm+ak']);
    assert.equal(node().akPublic, Buffer.from('ak of the fake').toString('base64'));
    assert.equal(await isAlive(node().swtpmPid as number), true);
    assert.deepEqual(
      (await ctx.journal.list()).map((r) => [r.id, r.data?.swtpmPid]),
      [[`local-node/${NODE}`, node().swtpmPid]],
    );
  });

  it('boots a node that does not run: registered with its address and AK, plugged in, its machine started and recorded', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: false });
    const lifecycle = new LocalNodeLifecycle(machine);
    await lifecycle.ensure(file, NODE, registry, ctx);
    assert.deepEqual(machine.calls, ['startTpm+ak', 'plug', 'start']);
    assert.deepEqual(registry.registered.get(NODE), {
      role: 'worker',
      group: 'worker_default',
      address: '10.213.7.100',
      akPublic: node().akPublic,
    });
    assert.equal(await lifecycle.state(file, NODE, ctx), 'running');
    assert.equal((await fs.readFile(nodePaths(ws, NODE).launcherPid, 'utf8')).trim(), String(node().launcherPid));
    assert.equal((await ctx.journal.list())[0].data?.launcherPid, node().launcherPid);

    await lifecycle.ensure(file, NODE, registry, ctx); // runs already: nothing starts
    assert.deepEqual(machine.calls, ['startTpm+ak', 'plug', 'start']);
  });

  it('reboots a machine whose TPM stops with it (a VM) by a power cycle: machine and TPM stop, both start anew, the AK is not read again', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: true });
    const lifecycle = new LocalNodeLifecycle(machine);
    await lifecycle.ensure(file, NODE, registry, ctx);
    const { launcherPid, swtpmPid, akPublic } = node();
    await lifecycle.ensure(file, NODE, registry, ctx, { reboot: true });
    assert.deepEqual(machine.calls, ['startTpm+ak', 'plug', 'start', 'startTpm', 'plug', 'start']);
    assert.equal(await isAlive(launcherPid as number), false);
    assert.equal(await isAlive(swtpmPid as number), false);
    assert.notEqual(node().swtpmPid, swtpmPid);
    assert.equal(await isAlive(node().swtpmPid as number), true);
    assert.equal(await lifecycle.state(file, NODE, ctx), 'running');
    assert.equal(node().akPublic, akPublic);
    assert.equal((await ctx.journal.list())[0].data?.swtpmPid, node().swtpmPid);
  });

  it('reboots a running machine whose TPM outlives it (a process node) by stopping it and starting it anew, its TPM kept', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: false });
    const lifecycle = new LocalNodeLifecycle(machine);
    await lifecycle.ensure(file, NODE, registry, ctx);
    const { launcherPid, swtpmPid } = node();
    await lifecycle.ensure(file, NODE, registry, ctx, { reboot: true });
    assert.deepEqual(machine.calls, ['startTpm+ak', 'plug', 'start', 'plug', 'start']);
    assert.notEqual(node().launcherPid, launcherPid);
    assert.equal(await isAlive(launcherPid as number), false);
    assert.equal(node().swtpmPid, swtpmPid);
    assert.equal(await isAlive(swtpmPid as number), true);
  });

  it('records the PID of a machine that reports a failed boot before it throws, so terminate finds it', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: false });
    machine.failNextStart = true;
    const lifecycle = new LocalNodeLifecycle(machine);
    await assert.rejects(lifecycle.ensure(file, NODE, registry, ctx), /the node did not boot/);
    assert.ok(node().launcherPid);
    assert.equal((await ctx.journal.list())[0].data?.launcherPid, node().launcherPid);
  });

  it('powers a node off and on: stop ends its machine and TPM, the next boot starts both and reads no AK again', async () => {
    const machine = new FakeMachine({ tpmStopsWithMachine: false });
    const lifecycle = new LocalNodeLifecycle(machine);
    await lifecycle.ensure(file, NODE, registry, ctx);
    const { launcherPid, swtpmPid } = node();
    await lifecycle.stop(file, NODE, ctx);
    assert.equal(await lifecycle.state(file, NODE, ctx), 'stopped');
    assert.equal(await isAlive(launcherPid as number), false);
    assert.equal(await isAlive(swtpmPid as number), false);
    await lifecycle.ensure(file, NODE, registry, ctx);
    assert.deepEqual(machine.calls, ['startTpm+ak', 'plug', 'start', 'startTpm', 'plug', 'start']);
    assert.equal(await lifecycle.state(file, NODE, ctx), 'running');
  });

  it('removes a node: unregistered first, its processes, folders, record and journal entry gone', async () => {
    const lifecycle = new LocalNodeLifecycle(new FakeMachine({ tpmStopsWithMachine: false }));
    await lifecycle.ensure(file, NODE, registry, ctx);
    const { launcherPid, swtpmPid } = node();
    await lifecycle.remove(file, NODE, registry, ctx);
    assert.equal(registry.registered.has(NODE), false);
    assert.equal(await isAlive(launcherPid as number), false);
    assert.equal(await isAlive(swtpmPid as number), false);
    await assert.rejects(fs.stat(nodePaths(ws, NODE).dir), { code: 'ENOENT' });
    assert.equal(file.record.nodes[NODE], undefined);
    assert.deepEqual(await ctx.journal.list(), []);
  });
});
