/**
 * End to end, with real processes: the built CLI (a private copy, see ./support.ts) runs mini up, status, init and
 * terminate in temporary workspaces; nodes are real bootstrappers with their own swtpm, state disk and address.
 * Every cluster is terminated in `after`, and whatever still carries a workspace's owner mark is killed.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { openGocryptfsStateDisk } from '../../bootstrapper/state-disk.js';
import { CLUSTER_RECORD_FILE } from '../../bootstrapper/node-setup.js';
import { createKubeletCsr } from '../../bootstrapper/kubelet-csr.js';
import { createValidator } from '../../lib/attestation/registry.js';
import { localInstanceInfo } from '../../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { editConfig } from '../../lib/config/edit.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { deriveStateDiskKey } from '../../lib/kms/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { startSwtpm } from '../../lib/tpm/swtpm.js';
import { ADMIN_CONF_FILE, CLUSTER_LOG_FILE, MASTER_SECRET_FILE } from '../../lib/workspace/files.js';
import { readMasterSecret } from '../../lib/workspace/master-secret.js';
import { FileResourceJournal } from '../../lib/workspace/resource-journal.js';
import { readState } from '../../lib/workspace/state.js';
import type { ProviderContext } from '../../providers/contract.js';
import { LocalInfrastructure } from '../../providers/local/infrastructure.js';
import { measureBoot, swtpmLauncherTpm } from '../../providers/local/launcher.js';
import { clusterPaths, nodePaths } from '../../providers/local/layout.js';
import type { ClusterNetwork } from '../../providers/local/network.js';
import { isAlive } from '../../providers/local/processes.js';
import {
  attemptJoin,
  cleanUp,
  clusterNetwork,
  clusterProcesses,
  copyBuiltCli,
  exists,
  run,
  start,
  status,
  tempDir,
  waitFor,
  type CliCopy,
} from './support.js';

let tmp: string;
let copy: CliCopy;

before(async () => {
  tmp = await tempDir('cl-e2e-');
  copy = await copyBuiltCli(tmp);
});

after(async () => {
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

async function newWorkspace(name: string): Promise<string> {
  const ws = path.join(tmp, name);
  await fs.mkdir(ws);
  return ws;
}

function providerContext(ws: string): ProviderContext {
  return { journal: new FileResourceJournal(ws), log: nullLogger, workspaceDir: ws };
}

/** The local provider as the copied CLI runs it (its image is the copy's dist/). */
function copiedInfrastructure(): LocalInfrastructure {
  return new LocalInfrastructure({ nodeProgram: { entry: copy.entry, imageDir: copy.imageDir } });
}

describe('e2e: mini up 1+2, a changed image, a rogue node, a restarted worker, terminate', function () {
  this.timeout(120_000);
  let ws: string;

  before(async () => {
    ws = await newWorkspace('mini');
  });

  after(async () => {
    await cleanUp(copy, ws);
  });

  it('mini up with 1 control plane + 2 workers: every node joined, and status says so', async () => {
    const res = await run(copy, ws, ['mini', 'up', '-w', '2']);
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stdout, /is up: 3 nodes joined/);
    const nodes = await status(copy, ws);
    assert.deepEqual(
      nodes.map((n) => [n.name, n.role, n.state]),
      [
        ['control-plane-0', 'control-plane', 'joined'],
        ['worker-0', 'worker', 'joined'],
        ['worker-1', 'worker', 'joined'],
      ],
    );
    for (const n of nodes)
      assert.match(n.address, /^10\.213\.\d+\.\d+$/, 'an address of the default pool 10.213.0.0/16');
    const text = await run(copy, ws, ['status']);
    assert.match(text.stdout, /worker-1\s+worker\s+10\.213\.\d+\.101\s+joined/);
    assert.match(text.stdout, /3 of 3 nodes joined/);
    const state = await readState(ws);
    assert.match(state.clusterValues.clusterID, /^[0-9a-f]{64}$/);
    assert.equal((await fs.stat(path.join(ws, MASTER_SECRET_FILE))).mode & 0o777, 0o600);
    assert.equal(
      await exists(path.join(ws, ADMIN_CONF_FILE)),
      false,
      'no kubeconfig: local nodes run no API server (backend none)',
    );
  });

  it('a worker whose image changed after create is refused naming the PCR, and gets no ticket and no key', async () => {
    const infra = copiedInfrastructure();
    // A line more in the bundled node program (a comment: the program still runs, its measurement differs).
    const file = copy.entry;
    const original = await fs.readFile(file);
    await fs.appendFile(file, '// changed after create\n');
    try {
      await infra.scaleNodeGroup('worker_default', 3, providerContext(ws));
    } finally {
      await fs.writeFile(file, original);
    }
    const refused = await waitFor('worker-2 to be refused', async () =>
      (await status(copy, ws)).find((n) => n.name === 'worker-2' && n.state === 'refused'),
    );
    assert.match(refused.reason ?? '', /PCR 9\b/);
    const disk = await openGocryptfsStateDisk({
      diskDir: nodePaths(ws, 'worker-2').stateDisk,
      mountPoint: path.join(tmp, 'view-worker-2'),
    });
    try {
      assert.equal(await disk.isFormatted(), false, 'a refused node got no disk key');
    } finally {
      await disk.close();
    }
    const log = await fs.readFile(nodePaths(ws, 'worker-2').log, 'utf8');
    assert.doesNotMatch(log, /joined the cluster/);
    // The others are unaffected.
    const others = (await status(copy, ws)).filter((n) => n.name !== 'worker-2');
    assert.ok(others.every((n) => n.state === 'joined'));
  });

  it('a node the provider did not register (its own swtpm, correct PCRs) is refused', async () => {
    const state = await readState(ws);
    const measurements = measurementsOf(await loadConfig(ws));
    const swtpm = await startSwtpm({ stateDir: path.join(tmp, 'rogue-tpm') });
    try {
      const image = { nodeBinary: process.execPath, imageDir: copy.imageDir, entry: copy.entry };
      await measureBoot(
        image,
        await swtpmLauncherTpm({ serverSocket: swtpm.serverSocket, ctrlSocket: swtpm.ctrlSocket }),
      );
      const tpm = await TpmClient.connect(swtpm.serverSocket);
      try {
        const { publicArea } = await tpm.attestationKey();
        for (const name of ['rogue-0', 'worker-0']) {
          const issuer = new VtpmIssuer({ variant: 'local-vtpm', tpm, instanceInfo: localInstanceInfo(name) });
          // Its PCRs are right: a validator that trusted its AK would accept it.
          const trusting = await createValidator(
            'local-vtpm',
            { measurements },
            { akRegistry: { lookup: async () => ({ akPublic: publicArea }) } },
          );
          const nonce = randomBytes(32);
          await trusting.validate(await issuer.issue(new Uint8Array(32), nonce), nonce);

          const { csr } = await createKubeletCsr(name, '127.0.0.1');
          const attempt = await attemptJoin(`${state.infrastructure.clusterEndpoint}:30090`, issuer, {
            diskUuid: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
            certificateRequest: Buffer.from(csr),
            isControlPlane: false,
            nodeName: name,
            hostPublicKey: Buffer.alloc(0),
          });
          assert.ok(attempt.error, `${name} was not refused`);
          assert.match(
            attempt.error.message,
            name === 'rogue-0' ? /no attestation key is registered/ : /attestation key differs/,
          );
          assert.ok(!attempt.responses.includes('sealedTicket'), `${name} got a sealed ticket`);
        }
      } finally {
        tpm.close();
      }
    } finally {
      await swtpm.stop();
    }
  });

  it('a worker restarted after joining rejoins with the same disk key, and its state-disk data is still there', async () => {
    const master = await readMasterSecret(ws);
    const np = nodePaths(ws, 'worker-0');
    const marker = randomBytes(4096);
    // A second view of the node's disk, mounted by the test with the key derived from the master secret.
    const view = { diskDir: np.stateDisk, mountPoint: path.join(tmp, 'view-worker-0') };
    const before = await openGocryptfsStateDisk(view);
    let record: Uint8Array | undefined;
    const uuid = before.uuid;
    try {
      await before.unlock(deriveStateDiskKey(master, uuid));
      record = await before.readFile(CLUSTER_RECORD_FILE);
      await before.writeFile('app/marker', marker);
    } finally {
      await before.close();
    }
    assert.ok(record, 'the node wrote its cluster record to its state disk');
    const rejoinsBefore = (await fs.readFile(np.log, 'utf8')).split('rejoined the cluster').length;

    await copiedInfrastructure().rebootNodes(['worker-0'], providerContext(ws));
    await waitFor(
      'worker-0 to rejoin',
      async () => (await fs.readFile(np.log, 'utf8')).split('rejoined the cluster').length > rejoinsBefore,
    );
    const worker0 = (await status(copy, ws)).find((n) => n.name === 'worker-0');
    assert.equal(worker0?.state, 'joined');

    const after = await openGocryptfsStateDisk(view);
    try {
      assert.equal(after.uuid, uuid);
      await after.unlock(deriveStateDiskKey(master, uuid)); // the key the node unlocked it with: a wrong one is refused
      assert.deepEqual(await after.readFile(CLUSTER_RECORD_FILE), record);
      assert.deepEqual(Buffer.from((await after.readFile('app/marker'))!), marker);
    } finally {
      await after.close();
    }
  });

  it('terminate leaves no process, network namespace or node folder behind, and keeps the master secret', async () => {
    const pids = await clusterProcesses(ws);
    const network = (await clusterNetwork(ws)) as ClusterNetwork;
    assert.equal(
      (await network.namespaces()).length,
      (await status(copy, ws)).length + 1,
      "one per node and the gateway's",
    );
    assert.ok(pids.length >= 8, `expected the cluster's processes, found ${pids.length}`);
    const secret = await fs.readFile(path.join(ws, MASTER_SECRET_FILE));
    const res = await run(copy, ws, ['terminate', '-y']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(await clusterProcesses(ws), []);
    assert.deepEqual((await Promise.all(pids.map(isAlive))).filter(Boolean), []);
    assert.equal(await exists(clusterPaths(ws).dir), false);
    assert.deepEqual(await network.namespaces(), []);
    assert.equal(await exists(path.join(ws, ADMIN_CONF_FILE)), false);
    assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);
    assert.equal((await readState(ws)).infrastructure.uid, '');
  });
});

describe('e2e: init against a node whose PCRs differ from the config', function () {
  this.timeout(120_000);
  let ws: string;

  before(async () => {
    ws = await newWorkspace('mismatch');
  });

  after(async () => {
    await cleanUp(copy, ws);
  });

  it('sends no master secret, names the PCR, and succeeds once the config is right', async () => {
    assert.equal((await run(copy, ws, ['config', 'generate', 'local'])).code, 0);
    const created = await run(copy, ws, ['create']);
    assert.equal(created.code, 0, created.stderr);
    const configText = await fs.readFile(path.join(ws, 'constellation-conf.yaml'));
    const wrong = 'ab'.repeat(32);
    await editConfig(ws, { measurements: { '9': { expected: wrong, warnOnly: false } } });

    const res = await run(copy, ws, ['init']);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, new RegExp(`PCR 9: expected ${wrong}, got [0-9a-f]{64}`));
    const nodes = await status(copy, ws);
    const cp = nodes.find((n) => n.role === 'control-plane');
    assert.equal(cp?.state, 'waiting', 'the node got no secrets, so it never started to initialize');
    assert.doesNotMatch(await fs.readFile(nodePaths(ws, 'control-plane-0').log, 'utf8'), /derived the cluster keys/);
    assert.equal((await readState(ws)).clusterValues.clusterID, '');
    assert.equal(await exists(path.join(ws, CLUSTER_LOG_FILE)), false);
    const secret = await fs.readFile(path.join(ws, MASTER_SECRET_FILE));

    await fs.writeFile(path.join(ws, 'constellation-conf.yaml'), configText);
    const retried = await run(copy, ws, ['init', '--json']);
    assert.equal(retried.code, 0, retried.stderr);
    const result = JSON.parse(retried.stdout) as { clusterId: string };
    assert.equal((await readState(ws)).clusterValues.clusterID, result.clusterId);
    assert.deepEqual(
      await fs.readFile(path.join(ws, MASTER_SECRET_FILE)),
      secret,
      'the master secret written before the first attempt is reused',
    );
  });
});

describe('e2e: the CLI killed during mini up', function () {
  this.timeout(120_000);
  const workspaces: string[] = [];

  afterEach(async () => {
    for (const ws of workspaces.splice(0)) await cleanUp(copy, ws);
  });

  /** Where mini up is killed, and whether the master secret is in the workspace by then. */
  const points: { name: string; reached: (ws: string) => Promise<boolean>; secretWritten: boolean }[] = [
    {
      name: 'after config generate',
      reached: (ws) => exists(path.join(ws, 'constellation-state.yaml')),
      secretWritten: false,
    },
    {
      name: 'during create (a node folder exists)',
      reached: async (ws) => (await fs.readdir(clusterPaths(ws).nodesDir).catch(() => [])).length > 0,
      secretWritten: false,
    },
    {
      name: 'after the master secret was written (during init)',
      reached: (ws) => exists(path.join(ws, MASTER_SECRET_FILE)),
      secretWritten: true,
    },
  ];

  async function killMiniUpAt(ws: string, point: (typeof points)[number]): Promise<Buffer | undefined> {
    const child = start(copy, ws, ['mini', 'up']);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let done = false;
    void exited.then(() => (done = true));
    await waitFor(
      point.name,
      async () =>
        (await point.reached(ws)) || (done && Promise.reject(new Error(`mini up ended before ${point.name}`))),
    );
    child.kill('SIGKILL');
    await exited;
    return fs.readFile(path.join(ws, MASTER_SECRET_FILE)).catch(() => undefined);
  }

  for (const point of points) {
    it(`killed ${point.name}: mini up again completes, terminate cleans up, the master secret is never replaced`, async () => {
      const ws = await newWorkspace(`killed-${points.indexOf(point)}`);
      workspaces.push(ws);
      const secret = await killMiniUpAt(ws, point);
      assert.equal(secret !== undefined, point.secretWritten, 'the master secret is written once, during init');

      const again = await run(copy, ws, ['mini', 'up', '-y']);
      // docs/design.md#workspace: the same command continues from wherever the killed run stopped.
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /is up: 2 nodes joined/);
      assert.ok((await status(copy, ws)).every((n) => n.state === 'joined'));
      if (secret) assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);

      const terminated = await run(copy, ws, ['terminate', '-y']);
      assert.equal(terminated.code, 0, terminated.stderr);
      assert.deepEqual(await clusterProcesses(ws), []);
      assert.equal(await exists(clusterPaths(ws).dir), false);
      if (secret) assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);
    });
  }

  it('killed during create: terminate right away cleans up everything the killed run started', async () => {
    const ws = await newWorkspace('killed-terminate');
    workspaces.push(ws);
    await killMiniUpAt(ws, points[1]);
    const network = (await clusterNetwork(ws)) as ClusterNetwork;
    const terminated = await run(copy, ws, ['terminate', '-y']);
    assert.equal(terminated.code, 0, terminated.stderr);
    assert.deepEqual(await clusterProcesses(ws), []);
    assert.equal(await exists(clusterPaths(ws).dir), false);
    assert.deepEqual(await network.namespaces(), []);
  });
});
