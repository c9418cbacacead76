/**
 * The local provider end to end, with real processes: a 1+2 cluster of stand-in node programs (./fixtures), each
 * with its own swtpm, launcher and network namespace, behind the cloud daemon's metadata server and load balancer.
 * Every case stands alone: they share one cluster, made in before(); a case that changes it (reboots, stops, scales,
 * adds, boots another image) puts it back as it found it, and beforeEach starts any node an earlier failure left
 * stopped. Terminate gets a cluster of its own.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Instance } from '../../../providers/contract.js';
import { ClusterFile } from '../../../providers/local/cluster-file.js';
import { expectedPcrValues, imageEventDigests } from '../../../providers/local/image-pcrs.js';
import { LocalInfrastructure } from '../../../providers/local/infrastructure.js';
import { measureBoot, swtpmLauncherTpm } from '../../../providers/local/launcher.js';
import { clusterPaths, LOAD_BALANCER_PORTS, METADATA_PORT, nodePaths } from '../../../providers/local/layout.js';
import { ClusterNetwork, netnsPath, rangeLink } from '../../../providers/local/network.js';
import { localAkRegistry } from '../../../providers/local/node-metadata.js';
import {
  BACKGROUND_NICE,
  findOwnedProcesses,
  isAlive,
  setSessionNice,
  stopOwnedProcesses,
} from '../../../providers/local/processes.js';
import { makeImage } from './fixtures/image.js';
import {
  bindAsNobody,
  createRequest,
  getJson,
  killLeftovers,
  netnsOf,
  rootLinkExists,
  tempDir,
  testContext,
  waitForJson,
} from './support.js';

interface NodeInfo {
  name: string;
  role: string;
  env: Record<string, string>;
  pcrs: { sha256: Record<string, string>; sha384?: Record<string, string> };
}

describe('local provider: a 1+2 cluster of process nodes', function () {
  this.timeout(60_000);
  let tmp: string;
  let ws: string;
  let infra: LocalInfrastructure;
  let ctx: ReturnType<typeof testContext>;
  let metadataUrl: string;
  let gateway: string;
  let controlPlaneAtReturn: string;
  let sessionNice: Record<string, string>;
  let hookCalls = 0;
  let launcherRanAtHook: Promise<boolean> | undefined;

  /** Per node, the nice value of its launcher's session (autogroup), e.g. "nice 10". */
  async function launcherSessionNice(): Promise<Record<string, string>> {
    const { record } = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const entries = await Promise.all(
      Object.entries(record.nodes).map(async ([name, n]) => [
        name,
        (await fs.readFile(`/proc/${n.launcherPid}/autogroup`, 'utf8')).trim().replace(/^.* (nice -?\d+)$/, '$1'),
      ]),
    );
    return Object.fromEntries(entries);
  }

  const info = (instance: Instance) => waitForJson<NodeInfo>(`http://${instance.privateIp}:9000/info`);
  const instances = () => infra.listInstances(ctx);
  const byName = async (name: string) => (await instances()).find((i) => i.name === name) as Instance;

  /** The PCRs a booted node of the image must have, as the node reports them (hex, both banks). */
  async function expectedPcrs(): Promise<NodeInfo['pcrs']> {
    const values = expectedPcrValues(await imageEventDigests(infra.image));
    const hex = (m: Map<number, Buffer>) => Object.fromEntries([...m].map(([i, v]) => [String(i), v.toString('hex')]));
    return { sha256: hex(values.sha256), sha384: hex(values.sha384) };
  }

  before(async () => {
    tmp = await tempDir('cl-local-');
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    const image = await makeImage(path.join(tmp, 'image'));
    infra = new LocalInfrastructure({ nodeProgram: { entry: image.entry, imageDir: image.imageDir } });
    ctx = testContext(ws);
    // kubeadm: the config's provider.local.kubernetesBackend must reach every node (the stand-in runs no backend).
    // Made as mini up makes it: create returns once the control plane is up, the workers still starting.
    const result = await infra.create(
      createRequest({ providerConfig: { kubernetesBackend: 'kubeadm' }, returnWhenControlPlanesUp: true }),
      {
        ...ctx,
        // Told once the control plane's launcher runs: whether it does is read then (its PID is not recorded yet).
        whileControlPlanesBoot: () => {
          hookCalls++;
          launcherRanAtHook = findOwnedProcesses(nodePaths(ws, 'control-plane-0').dir).then(async (pids) => {
            const commands = await Promise.all(pids.map((pid) => fs.readFile(`/proc/${pid}/cmdline`, 'utf8')));
            return commands.some((c) => c.includes('launcher'));
          });
        },
      },
    );
    controlPlaneAtReturn = (await byName('control-plane-0')).state;
    assert.ok(result.workersStarting instanceof Promise, 'the workers are handed over as a promise');
    await result.workersStarting;
    sessionNice = await launcherSessionNice();
    metadataUrl = result.providerState.metadataUrl as string;
    gateway = result.clusterEndpoint;
  });

  after(async () => {
    await infra.terminate(ctx).catch(() => undefined);
    await killLeftovers(ws);
    await fs.rm(tmp, { recursive: true, force: true });
  });

  beforeEach(async () => {
    // The shared cluster as made: every node running (a no-op unless an earlier case failed half-way).
    await infra.startNodes(await infra.nodeNames(ctx), ctx);
  });

  it('creates one running node per planned instance, on its own address of the cluster range', async () => {
    assert.equal(controlPlaneAtReturn, 'running', 'create returned with the control plane up');
    assert.equal(hookCalls, 1, 'create told once that it only waits for the control plane to boot');
    assert.equal(await launcherRanAtHook, true, "by then the control plane's launcher ran");
    assert.deepEqual(
      sessionNice,
      { 'control-plane-0': 'nice 0', 'worker-0': 'nice 10', 'worker-1': 'nice 10' },
      'the workers it did not wait for start at a lower CPU priority',
    );
    assert.match(gateway, /^10\.213\.\d+\.1$/, 'in the default address pool 10.213.0.0/16');
    const prefix = gateway.slice(0, -2);
    assert.deepEqual(
      (await instances()).map((i) => [i.name, i.role, i.nodeGroup, i.privateIp, i.state]),
      [
        ['control-plane-0', 'control-plane', 'control_plane_default', `${prefix}.10`, 'running'],
        ['worker-0', 'worker', 'worker_default', `${prefix}.100`, 'running'],
        ['worker-1', 'worker', 'worker_default', `${prefix}.101`, 'running'],
      ],
    );
    const np = nodePaths(ws, 'worker-1');
    assert.ok((await fs.stat(np.stateDisk)).isDirectory(), 'the state disk is a folder the node encrypts (gocryptfs)');
    assert.equal((await fs.stat(np.stateDisk)).mode & 0o777, 0o700);
    assert.equal((await fs.readFile(np.address, 'utf8')).trim(), `${prefix}.101`);
    assert.ok((await fs.stat(path.join(np.tpmDir, 'tpm2-00.permall'))).isFile());
    const resources = (await ctx.journal.list()).map((r) => r.id).sort();
    assert.deepEqual(resources, [
      'local-cloud',
      'local-cluster',
      'local-network',
      'local-node/control-plane-0',
      'local-node/worker-0',
      'local-node/worker-1',
    ]);
  });

  it("runs each node in its own network namespace (in the root mount namespace), the cloud daemon in the gateway's", async () => {
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const network = new ClusterNetwork(file.record.netId as string);
    const rootMounts = await fs.readlink('/proc/self/ns/mnt');
    for (const [name, node] of Object.entries(file.record.nodes)) {
      const pids = await findOwnedProcesses(nodePaths(ws, name).dir);
      const program = pids.filter((pid) => pid !== node.swtpmPid);
      assert.ok(program.includes(node.launcherPid as number), `${name}: the launcher, which runs the node program`);
      for (const pid of program) {
        assert.equal(await netnsOf(pid), network.nodeNetns(name), `${name}: process ${pid}`);
        assert.equal(
          await fs.readlink(`/proc/${pid}/ns/mnt`),
          rootMounts,
          `${name}: process ${pid} sees the provider's mounts`,
        );
      }
      assert.equal(await netnsOf(node.swtpmPid as number), 'root', `${name}'s swtpm (unix sockets) needs no namespace`);
    }
    assert.equal(await netnsOf(file.record.cloudPid as number), network.gateway);
    assert.deepEqual((await network.namespaces()).sort(), [
      network.gateway,
      network.nodeNetns('control-plane-0'),
      network.nodeNetns('worker-0'),
      network.nodeNetns('worker-1'),
    ]);
    assert.ok(await rootLinkExists(rangeLink(file.record.prefix as string)), 'the link that reserves the range');
  });

  it("lets no other user of the machine bind a node's address or the gateway's", async () => {
    const addresses = [gateway, ...(await instances()).map((i) => i.privateIp)];
    const ports = [METADATA_PORT, ...LOAD_BALANCER_PORTS];
    const result = await bindAsNobody(addresses, ports);
    assert.equal(Object.keys(result).length, addresses.length * ports.length);
    for (const [where, outcome] of Object.entries(result)) assert.equal(outcome, 'EADDRNOTAVAIL', where);
  });

  it('starts the node program with its identity and measures the image into PCR 4, 9 and 11', async () => {
    const expected = await expectedPcrs();
    const measurements = await infra.expectedMeasurements();
    assert.deepEqual(Object.keys(measurements).sort(), ['11', '12', '13', '4', '8', '9']);
    assert.notEqual(measurements['9'].expected, '0'.repeat(64));
    for (const instance of await instances()) {
      const node = await info(instance);
      assert.equal(node.name, instance.name);
      assert.equal(node.env.NODE_IP, instance.privateIp);
      assert.equal(node.env.NODE_ROLE, instance.role);
      assert.equal(node.env.METADATA_URL, metadataUrl);
      assert.equal(node.env.STATE_DISK, nodePaths(ws, instance.name).stateDisk);
      assert.equal(node.env.STATE_DIR, nodePaths(ws, instance.name).stateDir);
      assert.equal(node.env.KUBERNETES_BACKEND, 'kubeadm', "the config's provider.local.kubernetesBackend");
      assert.deepEqual(node.pcrs, expected, `${instance.name}'s PCRs`);
      for (const [index, m] of Object.entries(measurements)) assert.equal(node.pcrs.sha256[index], m.expected);
    }
  });

  it('answers each node its own metadata by source address, and peers, load balancer, init-secret hash', async () => {
    for (const instance of await instances()) {
      const base = `http://${instance.privateIp}:9000/metadata`;
      assert.deepEqual(await waitForJson(`${base}/self`), {
        name: instance.name,
        providerId: `local://${instance.name}`,
        role: instance.role,
        vpcIp: instance.privateIp,
      });
      const peers = await waitForJson<{ name: string }[]>(`${base}/peers`);
      assert.deepEqual(peers.map((p) => p.name).sort(), ['control-plane-0', 'worker-0', 'worker-1']);
      assert.equal(await waitForJson(`${base}/lb`), gateway);
      assert.equal(await waitForJson(`${base}/init-secret-hash`), createRequest().initSecretHash);
    }
    // This machine's address in the range (where the CLI's connections come from) is no node.
    const stranger = await getJson(`${metadataUrl}/v1/self`);
    assert.equal(stranger.status, 403);
    assert.deepEqual(stranger.body, {
      error: `${gateway.slice(0, -2)}.2 is not the address of a node of this cluster`,
    });
  });

  it('keeps node registration to the CLI side (the control API needs the workspace token)', async () => {
    const intruder = await fetch(`${metadataUrl}/v1/control/nodes/evil`, {
      method: 'PUT',
      body: JSON.stringify({
        role: 'worker',
        group: 'worker_default',
        address: `${gateway.slice(0, -2)}.200`,
        akPublic: 'AAAA',
      }),
    });
    assert.equal(intruder.status, 401);
    assert.equal(await localAkRegistry(metadataUrl).lookup('evil'), undefined);
  });

  it('serves the registered AK of each node, and nothing for unknown instances', async () => {
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const registry = localAkRegistry(metadataUrl);
    for (const [name, node] of Object.entries(file.record.nodes)) {
      const ak = (await registry.lookup(name))?.akPublic;
      assert.ok(ak && ak.length > 64, `an AK for ${name}`);
      assert.equal(Buffer.from(ak).toString('base64'), node.akPublic);
      assert.equal(Buffer.from(ak).readUInt16BE(0), 0x0023, 'TPMT_PUBLIC of an ECC key');
    }
    const aks = Object.values(file.record.nodes).map((n) => n.akPublic);
    assert.equal(new Set(aks).size, 3, 'every node has its own TPM, so its own AK');
    assert.equal(await registry.lookup('worker-99'), undefined);
  });

  it('knows no AK of a TPM it did not create, even one measured exactly like a node', async () => {
    const { startSwtpm } = await import('../../../lib/tpm/swtpm.js');
    const { TpmClient } = await import('../../../lib/tpm/client.js');
    const rogue = await startSwtpm({ stateDir: path.join(tmp, 'rogue-tpm') });
    try {
      await measureBoot(infra.image, await swtpmLauncherTpm(rogue));
      const client = await TpmClient.connect(rogue.serverSocket);
      let rogueAk: Uint8Array;
      try {
        const pcrs = await client.pcrRead(0x0b, [4, 9, 11]);
        for (const index of [4, 9, 11])
          assert.equal(
            Buffer.from(pcrs.get(index) as Uint8Array).toString('hex'),
            (await expectedPcrs()).sha256[String(index)],
          );
        rogueAk = (await client.createAttestationKey()).publicArea;
      } finally {
        client.close();
      }
      const registry = localAkRegistry(metadataUrl);
      for (const instance of await instances()) {
        assert.notDeepEqual(
          await registry.lookup(instance.name),
          rogueAk,
          `the AK registered for ${instance.name} is not the rogue's`,
        );
      }
      assert.equal(await registry.lookup('rogue'), undefined);
    } finally {
      await rogue.stop();
    }
  });

  it('forwards load-balancer connections to the control plane', async () => {
    for (let i = 0; i < 3; i++) {
      const node = await waitForJson<NodeInfo>(`http://${gateway}:9000/info`);
      assert.equal(node.name, 'control-plane-0');
    }
  });

  it('reboots a node: new processes, TPM reset, PCRs measured again', async () => {
    const before = await byName('worker-0');
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const oldLauncher = file.record.nodes['worker-0'].launcherPid as number;
    const oldSwtpm = file.record.nodes['worker-0'].swtpmPid as number;
    await waitForJson(`http://${before.privateIp}:9000/extend-pcr-12`);
    assert.notEqual((await info(before)).pcrs.sha256['12'], '0'.repeat(64));

    await infra.rebootNodes(['worker-0'], ctx);
    const after = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    assert.notEqual(after.record.nodes['worker-0'].launcherPid, oldLauncher);
    assert.equal(after.record.nodes['worker-0'].swtpmPid, oldSwtpm, 'same TPM, reset');
    assert.equal(await isAlive(oldLauncher), false);
    assert.deepEqual((await info(before)).pcrs, await expectedPcrs());
  });

  it('stop powers a node off (its processes and TPM end, the instance is stopped); start boots it with the same AK', async () => {
    const akBefore = await localAkRegistry(metadataUrl).lookup('worker-0');
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const { launcherPid, swtpmPid } = file.record.nodes['worker-0'];
    await infra.stopNodes(['worker-0'], ctx);
    assert.equal((await byName('worker-0')).state, 'stopped');
    assert.equal(await isAlive(launcherPid as number), false);
    assert.equal(await isAlive(swtpmPid as number), false, 'a powered-off node has no TPM running');
    await infra.startNodes(['worker-0'], ctx);
    const started = await byName('worker-0');
    assert.equal(started.state, 'running');
    assert.deepEqual(
      await localAkRegistry(metadataUrl).lookup('worker-0'),
      akBefore,
      'the TPM kept its state: same AK',
    );
    assert.deepEqual((await info(started)).pcrs, await expectedPcrs());
  });

  it('comes back after this machine restarted (every process and namespace gone): same range, nodes running', async () => {
    const before = await instances();
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const network = new ClusterNetwork(file.record.netId as string);
    await infra.stopNodes(
      before.map((i) => i.name),
      ctx,
    );
    await stopOwnedProcesses(clusterPaths(ws).cloudOwner, [file.record.cloudPid as number]);
    await network.remove();
    assert.deepEqual(await network.namespaces(), []);

    await infra.startNodes(
      before.map((i) => i.name),
      ctx,
    );
    const after = await instances();
    assert.deepEqual(
      after.map((i) => [i.name, i.privateIp, i.state]),
      before.map((i) => [i.name, i.privateIp, 'running']),
    );
    assert.equal((await network.namespaces()).length, before.length + 1);
    for (const instance of after) assert.equal((await info(instance)).name, instance.name);
    assert.deepEqual(await waitForJson(`http://${after[0].privateIp}:9000/metadata/self`), {
      name: after[0].name,
      providerId: `local://${after[0].name}`,
      role: after[0].role,
      vpcIp: after[0].privateIp,
    });
  });

  it('measures a changed image: one changed byte changes PCR 9 (and the manifest in PCR 11), not PCR 4', async () => {
    // A copy of the image with one byte changed, booted by a node added to the cluster (removed again at the end).
    const changedImage = await makeImage(path.join(tmp, 'changed-image'));
    const payload = await fs.readFile(changedImage.payload);
    payload[100] ^= 1;
    await fs.writeFile(changedImage.payload, payload);
    const changedInfra = new LocalInfrastructure({
      nodeProgram: { entry: changedImage.entry, imageDir: changedImage.imageDir },
    });
    const old = await infra.expectedMeasurements();
    const changed = await changedInfra.expectedMeasurements();
    assert.notEqual(changed['9'].expected, old['9'].expected);
    assert.notEqual(changed['11'].expected, old['11'].expected);
    assert.equal(changed['4'].expected, old['4'].expected);

    const added = await changedInfra.addInstance('worker_default', ctx);
    try {
      const node = await info(added);
      assert.equal(node.pcrs.sha256['9'], changed['9'].expected);
      assert.notEqual(node.pcrs.sha256['9'], old['9'].expected);
    } finally {
      await infra.removeInstance(added.name, ctx);
    }
  });

  it('scales a node group up and down', async () => {
    const before = (await instances()).map((i) => i.name);
    await infra.scaleNodeGroup('worker_default', 3, ctx);
    const [added] = (await instances()).filter((i) => !before.includes(i.name));
    assert.equal(added.state, 'running');
    assert.equal(added.nodeGroup, 'worker_default');
    assert.equal((await info(added)).name, added.name);
    assert.ok(await localAkRegistry(metadataUrl).lookup(added.name));

    await infra.scaleNodeGroup('worker_default', 2, ctx);
    assert.deepEqual(
      (await instances()).map((i) => i.name),
      before,
      'the newest node went',
    );
    assert.equal(await localAkRegistry(metadataUrl).lookup(added.name), undefined);
    assert.deepEqual(await findOwnedProcesses(nodePaths(ws, added.name).dir), []);
    await assert.rejects(fs.stat(nodePaths(ws, added.name).dir), { code: 'ENOENT' });
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    await assert.rejects(fs.stat(netnsPath(new ClusterNetwork(file.record.netId as string).nodeNetns(added.name))), {
      code: 'ENOENT',
    });
    await assert.rejects(infra.scaleNodeGroup('nope', 1, ctx), /no node group "nope"/);
  });

  it('adds an instance to a group, then removes exactly the one named (not the newest)', async () => {
    const before = (await instances()).map((i) => i.name);
    const first = await infra.addInstance('worker_default', ctx);
    const second = await infra.addInstance('worker_default', ctx);
    try {
      assert.equal(first.nodeGroup, 'worker_default');
      assert.equal(first.state, 'running');
      assert.ok(!before.includes(first.name) && !before.includes(second.name) && first.name !== second.name);
      await infra.removeInstance(first.name, ctx);
      assert.deepEqual(
        (await instances()).map((i) => i.name),
        [...before, second.name].sort(),
      );
      await assert.rejects(fs.stat(nodePaths(ws, first.name).dir), { code: 'ENOENT' });
      await infra.removeInstance(first.name, ctx); // again: gone already, no error
    } finally {
      await infra.removeInstance(first.name, ctx);
      await infra.removeInstance(second.name, ctx);
    }
  });

  it('marked initialized: serves no init-secret hash any more, and its workers run at the usual CPU priority', async () => {
    // As create left them (the nodes have been rebooted since).
    const { record } = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    for (const [name, n] of Object.entries(record.nodes))
      if (name.startsWith('worker-')) await setSessionNice(n.launcherPid as number, BACKGROUND_NICE);
    assert.ok(Object.values(await launcherSessionNice()).includes('nice 10'));
    await infra.markInitialized(ctx);
    const controlPlane = await byName('control-plane-0');
    assert.equal(await waitForJson(`http://${controlPlane.privateIp}:9000/metadata/init-secret-hash`), '');
    const nice = await launcherSessionNice();
    assert.ok(Object.keys(nice).some((name) => name.startsWith('worker-')));
    for (const [name, value] of Object.entries(nice)) assert.equal(value, 'nice 0', name);
  });
});

describe('local provider: terminate', function () {
  this.timeout(60_000);
  let tmp: string;
  let ws: string;
  let infra: LocalInfrastructure;
  let ctx: ReturnType<typeof testContext>;

  before(async () => {
    tmp = await tempDir('cl-local-term-');
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    const image = await makeImage(path.join(tmp, 'image'));
    infra = new LocalInfrastructure({ nodeProgram: { entry: image.entry, imageDir: image.imageDir } });
    ctx = testContext(ws);
    const groups = createRequest().nodeGroups.map((g) => ({ ...g, initialCount: 1 }));
    await infra.create(createRequest({ nodeGroups: groups }), ctx);
  });

  after(async () => {
    await infra.terminate(ctx).catch(() => undefined);
    await killLeftovers(ws);
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('terminates: no process, namespace, link or node folder left, journal emptied', async () => {
    const pids = await findOwnedProcesses(clusterPaths(ws).dir);
    const file = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    const network = new ClusterNetwork(file.record.netId as string);
    // cloud daemon + per node: swtpm, and the launcher that runs the node program in its process
    assert.ok(pids.length >= 5, `expected the cluster's processes, found ${pids.length}`);
    await infra.terminate(ctx);
    for (const pid of pids) assert.equal(await isAlive(pid), false, `process ${pid} still runs`);
    await assert.rejects(fs.stat(clusterPaths(ws).dir), { code: 'ENOENT' });
    assert.deepEqual(await network.namespaces(), []);
    assert.equal(await rootLinkExists(rangeLink(file.record.prefix as string)), false);
    assert.deepEqual(await ctx.journal.list(), []);
    assert.deepEqual(await infra.listInstances(ctx), []);
    await infra.terminate(ctx); // again: nothing to do, no error
  });
});
