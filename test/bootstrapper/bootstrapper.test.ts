import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { openGocryptfsStateDisk } from '../../bootstrapper/state-disk.js';
import { MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import { requestVerifiedAttestation } from '../../lib/atls/index.js';
import { deriveClusterId, deriveMeasurementSecret, deriveStateDiskKey, expectedPcr15 } from '../../lib/kms/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { deriveSshCa, sshCaPublicKeyLine } from '../../lib/ssh/certificate.js';
import { NODE_SSH_CA_FILE, NODE_SSH_HOST_CERT_FILE, NODE_SSH_HOST_KEY_FILE } from '../../lib/ssh/sshd-config.js';
import { cliInit, cliRecover, getStatus, loopbackNet, TestCluster, type TestNode } from './support/test-cluster.js';
import { pollUntil } from '../../lib/poll.js';
import { requireTool } from '../support/require-tool.js';

const hasSwtpm = spawnSync('swtpm', ['--version'], { stdio: 'ignore' }).status === 0;

function logged(node: TestNode): Array<Record<string, unknown>> {
  return node.log.map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** No secret of the cluster in any node's log. */
function assertNoSecretsLogged(cluster: TestCluster): void {
  const secrets = [cluster.masterKey, cluster.masterSalt, cluster.initSecret];
  for (const node of cluster.nodes) {
    const text = node.log.join('\n');
    for (const secret of secrets) {
      assert.ok(
        !text.includes(secret.toString('hex')) && !text.includes(secret.toString('base64')),
        `a secret is in ${node.name}'s log`,
      );
    }
    assert.ok(!text.includes('PRIVATE KEY'), `a private key is in ${node.name}'s log`);
  }
}

describe('bootstrapper (in-process nodes with real swtpm, gRPC on loopback addresses)', function () {
  this.timeout(60_000);
  // Every case starts from a new cluster with one uninitialized control plane, and brings it as far as it needs.
  let cluster: TestCluster;
  let cp: TestNode;
  let ip: (host: number) => string;
  const clusterId = () =>
    deriveClusterId(
      deriveMeasurementSecret({ key: cluster.masterKey, salt: cluster.masterSalt }),
      cluster.measurementSalt,
    );

  /** `constellation init` through cp-0 with the cluster's secrets. */
  async function initialize(): Promise<void> {
    const outcome = await cliInit(cp.address(cp.bootstrapper.ports.init!), cluster.validator(), cluster.initSecrets());
    assert.equal(outcome.error, undefined, outcome.error?.message);
  }

  /** Starts worker-0 and waits until it joined the initialized cluster. */
  async function joinedWorker(): Promise<TestNode> {
    const worker = await cluster.startNode({ name: 'worker-0', ip: ip(3), role: 'worker' });
    const status = await worker.bootstrapper.status.waitFor('joined', 'failed', 'refused');
    assert.equal(status.state, 'joined', status.reason);
    return worker;
  }

  beforeEach(async function () {
    requireTool(this, hasSwtpm, 'swtpm');
    cluster = await TestCluster.create();
    ip = loopbackNet();
    cp = await cluster.startNode({ name: 'cp-0', ip: ip(2), role: 'control-plane' });
  });
  afterEach(async () => {
    try {
      if (cluster) assertNoSecretsLogged(cluster);
    } finally {
      await cluster?.close();
    }
  });

  it('refuses init with a wrong init secret, sends that caller none of its log, and the node stays unlocked', async () => {
    const outcome = await cliInit(
      cp.address(cp.bootstrapper.ports.init!),
      cluster.validator(),
      cluster.initSecrets({ initSecret: Buffer.alloc(32, 7) }),
    );
    assert.equal(outcome.result, undefined);
    assert.match(outcome.error!.message, /init secret is wrong/);
    // The node has a log (it logged the refusal), but a caller that did not prove the init secret gets none of it.
    assert.ok(logged(cp).some((l) => l.msg === 'init refused: wrong init secret'));
    assert.equal((outcome.error as Error & { log: Uint8Array }).log.length, 0);
    assert.equal(cp.bootstrapper.lock.locked, false);
    assert.equal(cp.bootstrapper.status.get().state, 'waiting');
    assert.equal(await cp.disk.isFormatted(), false);
  });

  it('sends no secret to a node whose PCRs do not match the config, and says which PCR differs', async () => {
    const wrong = { ...cluster.measurements, '9': { expected: 'ab'.repeat(32), warnOnly: false } };
    const logStart = cp.log.length;
    const outcome = await cliInit(
      cp.address(cp.bootstrapper.ports.init!),
      cluster.validator(wrong),
      cluster.initSecrets(),
    );
    assert.match(outcome.error!.message, /PCR 9/);
    assert.deepEqual(outcome.sent, ['challenge'], 'the CLI sent the challenge and nothing sealed');
    // The node saw the exchange end before any secret arrived.
    const linesOfThisInit = () => logged(cp).slice(logStart);
    await waitUntil(() => linesOfThisInit().some((l) => l.msg === 'init request ended before any secret arrived'));
    assert.ok(!linesOfThisInit().some((l) => l.msg === 'init secrets received'));
    assert.equal(cp.bootstrapper.lock.locked, false);
    assert.equal(await cp.disk.isFormatted(), false);
  });

  it('initializes: progress per step, the InitResult, PCR 15 = expectedPcr15(clusterID), the disk formatted with the derived key', async () => {
    const outcome = await cliInit(cp.address(cp.bootstrapper.ports.init!), cluster.validator(), cluster.initSecrets());
    assert.equal(outcome.error, undefined, outcome.error?.message);
    assert.deepEqual(outcome.progress, [
      'keys',
      'pcr15',
      'state-disk',
      'pki',
      'kubernetes',
      'cluster-store',
      'join-service',
      'done',
    ]);
    const result = outcome.result!;
    assert.deepEqual(new Uint8Array(result.clusterId), clusterId());
    assert.equal(result.kubernetesBackend, 'none');
    const kubeconfig = parse(Buffer.from(result.kubeconfig).toString()) as {
      'current-context': string;
      clusters: { cluster: { server: string } }[];
    };
    assert.match(kubeconfig['current-context'], /^kubernetes-admin@/);
    assert.equal(kubeconfig.clusters[0]!.cluster.server, `https://${ip(2)}:6443`);

    assert.deepEqual(new Uint8Array(await cp.pcr(15)), expectedPcr15(clusterId()));
    assert.equal(cp.bootstrapper.lock.owner, 'init');
    const status = await getStatus(cp.address(cp.bootstrapper.ports.verify));
    const { name, role, state, reason, attestationVariant, kubernetesVersion, lastAttestation } = status;
    assert.deepEqual(
      {
        name,
        role,
        state,
        reason,
        clusterId: status.clusterId,
        attestationVariant,
        kubernetesVersion,
        verifier: lastAttestation?.verifier,
        result: lastAttestation?.result,
      },
      {
        name: 'cp-0',
        role: 'control-plane',
        state: 'initialized',
        reason: '',
        clusterId: Buffer.from(clusterId()).toString('hex'),
        attestationVariant: 'local-vtpm',
        kubernetesVersion: 'v1.31.1',
        verifier: 'the CLI (init)',
        result: 'accepted',
      },
    );
    assert.match(status.imageMeasurementsDigest, /^[0-9a-f]{12}$/);
    assert.match(status.microserviceVersion, /^v\d+\.\d+\.\d+/);

    // The disk is formatted with HKDF(master, "key-" + uuid): a second handle unlocks with that key, not with another.
    const disk = await openGocryptfsStateDisk({
      diskDir: path.join(cp.dir, 'state-disk'),
      mountPoint: path.join(cp.dir, 'second-view'),
    });
    try {
      await assert.rejects(disk.unlock(Buffer.alloc(32, 1)));
      await disk.unlock(deriveStateDiskKey({ key: cluster.masterKey, salt: cluster.masterSalt }, disk.uuid));
    } finally {
      await disk.close();
    }
    assert.ok(
      existsSync(path.join(cp.disk.mountPoint, 'etcd', 'data', 'member')),
      "the cluster store's etcd member keeps its data on the state disk",
    );
  });

  it('answers a re-run init with the same secrets with the same result, and refuses another master secret', async () => {
    await initialize();
    const again = await cliInit(cp.address(cp.bootstrapper.ports.init!), cluster.validator(), cluster.initSecrets());
    assert.equal(again.error, undefined, again.error?.message);
    assert.deepEqual(new Uint8Array(again.result!.clusterId), clusterId());

    const other = await cliInit(
      cp.address(cp.bootstrapper.ports.init!),
      cluster.validator(),
      cluster.initSecrets({ masterKey: Buffer.alloc(32, 9) }),
    );
    assert.equal(other.result, undefined);
    assert.match(other.error!.message, /already initialized/);
    assert.ok(other.sent.includes('sealedSecrets'));
    assert.equal(cp.bootstrapper.status.get().state, 'initialized');
  });

  it('joins a worker through the join service: same clusterID, PCR 15, a formatted disk, the SSH CA and host certificates; GetStatus says joined', async () => {
    await initialize();
    const worker = await cluster.startNode({ name: 'worker-0', ip: ip(3), role: 'worker' });
    const status = await worker.bootstrapper.status.waitFor('joined', 'failed', 'refused');
    assert.equal(status.state, 'joined', status.reason);
    // The control plane's join service registered the worker's bootstrap token through the control plane's backend.
    const tokens = cp.backend.tokenSink(nullLogger);
    assert.ok(tokens instanceof MemoryTokenSink);
    assert.equal(tokens.size, 1);
    assert.equal(status.clusterId, Buffer.from(clusterId()).toString('hex'));
    assert.deepEqual(new Uint8Array(await worker.pcr(15)), expectedPcr15(clusterId()));
    assert.equal(await worker.disk.isFormatted(), true);
    assert.equal((await getStatus(worker.address(worker.bootstrapper.ports.verify))).state, 'joined');
    // The emergency SSH CA its SSH server trusts: the one `constellation ssh` derives from the master secret.
    const caLine = sshCaPublicKeyLine(deriveSshCa({ key: cluster.masterKey, salt: cluster.masterSalt }).publicKey);
    assert.equal(Buffer.from((await worker.disk.readFile(NODE_SSH_CA_FILE))!).toString(), caLine);
    assert.equal(Buffer.from((await cp.disk.readFile(NODE_SSH_CA_FILE))!).toString(), caLine);
    // Each node's SSH host key, with a host certificate for it: the init node signed its own, the join service the
    // worker's (for the key the join request carried).
    for (const node of [cp, worker]) {
      const key = Buffer.from((await node.disk.readFile(NODE_SSH_HOST_KEY_FILE))!).toString();
      assert.match(key, /^-----BEGIN OPENSSH PRIVATE KEY-----\n/);
      const cert = Buffer.from((await node.disk.readFile(NODE_SSH_HOST_CERT_FILE))!).toString();
      assert.match(cert, /^ssh-ed25519-cert-v01@openssh\.com \S+/);
    }

    // The verify service proves the worker belongs to this cluster: PCR 15 as expected.
    const withPcr15 = {
      ...cluster.measurements,
      '15': { expected: Buffer.from(expectedPcr15(clusterId())).toString('hex'), warnOnly: false },
    };
    const verified = await requestVerifiedAttestation(worker.address(worker.bootstrapper.ports.verify), {
      validator: cluster.validator(withPcr15),
    });
    assert.ok(verified.result.comparisons.every((c) => c.match));
  });

  it('rejoins a restarted worker: the same disk key, and the data written before the restart is still there', async () => {
    await initialize();
    const worker = await joinedWorker();
    await worker.disk.writeFile('app/data', Buffer.from('written before the restart'));
    const uuid = worker.disk.uuid;
    await worker.reboot();
    assert.equal(worker.disk.uuid, uuid);
    assert.equal(worker.bootstrapper.ports.recovery !== undefined, true, 'a rebooted node serves recovery');
    const status = await worker.bootstrapper.status.waitFor('joined', 'failed');
    assert.equal(status.state, 'joined', status.reason);
    assert.deepEqual(new Uint8Array(await worker.pcr(15)), expectedPcr15(clusterId()));
    assert.equal(Buffer.from((await worker.disk.readFile('app/data'))!).toString(), 'written before the restart');
    assert.ok(logged(worker).some((l) => l.msg === 'bootstrapper started' && l.mode === 'rejoin'));
    assert.ok(logged(cp).some((l) => l.msg === 'rejoin ticket issued' && l.nodeName === 'worker-0'));
  });

  it('refuses a node that is not registered with the provider, though its PCRs are right', async () => {
    await initialize();
    const stranger = await cluster.startNode({ name: 'stranger', ip: ip(4), role: 'worker', register: false });
    const status = await stranger.bootstrapper.status.waitFor('refused', 'joined');
    assert.equal(status.state, 'refused');
    assert.match(status.reason, /no attestation key is registered for instance "stranger"/);
    assert.equal(stranger.bootstrapper.lock.locked, false);
    assert.equal(await stranger.disk.isFormatted(), false);
    assert.equal((await getStatus(stranger.address(stranger.bootstrapper.ports.verify))).reason, status.reason);
  });

  it('refuses a worker whose image changed, naming the PCR', async () => {
    await initialize();
    const tampered = await cluster.startNode({ name: 'tampered', ip: ip(5), role: 'worker', tamperedImage: true });
    const status = await tampered.bootstrapper.status.waitFor('refused', 'joined');
    assert.equal(status.state, 'refused');
    assert.match(status.reason, /PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
    assert.equal(await tampered.disk.isFormatted(), false);
  });

  it("recovers a rebooted control plane with no join service left, through the recovery server; the recover call gets its answer even when resuming the node outlasts the servers' close grace", async () => {
    await initialize();
    const worker = await joinedWorker();
    // Resuming the store takes longer than the 2 s the node's servers give running calls when they close: the
    // recovery server must not close (and cut the call off) before the node is back.
    cp.storeResumeDelayMs = 2_500;
    await cp.reboot();
    assert.equal(cp.bootstrapper.status.get().state, 'waiting');
    const address = cp.address(cp.bootstrapper.ports.recovery!);
    const wrong = await cliRecover(address, cluster.validator(), {
      masterKey: Buffer.alloc(32, 3),
      masterSalt: cluster.masterSalt,
    });
    assert.match(wrong.error!.message, /does not unlock the state disk/);
    assert.equal(cp.bootstrapper.lock.locked, false, 'a wrong master secret changes nothing');

    const outcome = await cliRecover(address, cluster.validator(), {
      masterKey: cluster.masterKey,
      masterSalt: cluster.masterSalt,
    });
    assert.equal(outcome.error, undefined, outcome.error?.message);
    assert.equal(outcome.result, cp.disk.uuid);
    assert.equal(cp.bootstrapper.status.get().state, 'joined');
    assert.deepEqual(new Uint8Array(await cp.pcr(15)), expectedPcr15(clusterId()));

    // Its join service runs again: a rebooted worker rejoins.
    await worker.reboot();
    assert.equal((await worker.bootstrapper.status.waitFor('joined', 'failed')).state, 'joined');
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  await pollUntil(() => condition() || undefined, { timeoutMs, intervalMs: 20, what: 'the condition' });
}
