import assert from 'node:assert/strict';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { createCluster } from '../../cli/cluster/create.js';
import { initCluster, type InitOptions } from '../../cli/cluster/init.js';
import { deriveClusterId, deriveMeasurementSecret } from '../../lib/kms/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { ADMIN_CONF_FILE, CLUSTER_LOG_FILE, MASTER_SECRET_FILE } from '../../lib/workspace/files.js';
import { masterSecretPath, readMasterSecret } from '../../lib/workspace/master-secret.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { readState, writeState } from '../../lib/workspace/state.js';
import {
  KUBECONFIG,
  MeasuringMemoryProvider,
  StandInIssuer,
  standInValidatorFactory,
  startStandInNode,
  type StandInNode,
} from './support/stand-in.js';
import { IMAGE_MEASUREMENTS, localWorkspace, NODE_PCRS } from './support/workspace.js';
import { pollUntil } from '../../lib/poll.js';

describe('initCluster', () => {
  let ws: string;
  let node: StandInNode | undefined;

  beforeEach(async () => {
    ws = await localWorkspace();
    await createCluster({
      workspaceDir: ws,
      provider: new MeasuringMemoryProvider(IMAGE_MEASUREMENTS),
      journal: new MemoryResourceJournal(),
      log: nullLogger,
    });
  });
  afterEach(async () => {
    await node?.close();
    node = undefined;
    await fs.rm(ws, { recursive: true, force: true });
  });

  const init = (extra: Partial<InitOptions> = {}) =>
    initCluster({
      workspaceDir: ws,
      log: nullLogger,
      createValidator: standInValidatorFactory,
      validatorDeps: {},
      port: node!.port,
      ...extra,
    });

  it('writes the master secret before anything is sent, sends it only to the attested node, and records the result', async () => {
    let secretOnChallenge: boolean | undefined;
    node = await startStandInNode({
      issuer: new StandInIssuer(NODE_PCRS),
      onChallenge: () => void (secretOnChallenge ??= existsSync(masterSecretPath(ws))),
    });
    const progress: string[] = [];
    const result = await init({ progress: (m) => progress.push(m) });

    assert.equal(secretOnChallenge, true, 'the master secret existed when the first message reached the node');
    const master = await readMasterSecret(ws);
    const state = await readState(ws);
    assert.equal(node.received.length, 1);
    const sent = node.received[0];
    assert.deepEqual(new Uint8Array(sent.masterKey), master.key);
    assert.equal(Buffer.from(sent.initSecret).toString('hex'), state.infrastructure.initSecret);
    assert.equal(Buffer.from(sent.measurementSalt).toString('hex'), state.clusterValues.measurementSalt);
    assert.deepEqual(JSON.parse(Buffer.from(sent.attestationConfig).toString()).variant, 'local-vtpm');
    const clusterId = Buffer.from(deriveClusterId(deriveMeasurementSecret(master), sent.measurementSalt)).toString(
      'hex',
    );
    assert.equal(result.clusterId, clusterId);
    assert.equal(state.clusterValues.clusterID, clusterId);
    assert.equal(result.kubernetesBackend, 'none');
    // No API server runs with backend none: a kubeconfig would only make kubectl wait for one.
    assert.equal(result.kubeconfigFile, '');
    assert.equal(existsSync(path.join(ws, ADMIN_CONF_FILE)), false, 'no kubeconfig where no Kubernetes runs');
    assert.ok(progress.includes('derived the keys'));

    const again = await init();
    assert.equal(again.alreadyInitialized, true);
    assert.equal(again.clusterId, clusterId);
    assert.equal(node.received.length, 1, 'an initialized cluster is not initialized again');
  });

  it('sends nothing to a node whose PCRs differ, and names the PCR', async () => {
    node = await startStandInNode({ issuer: new StandInIssuer({ ...NODE_PCRS, '9': 'ee'.repeat(32) }) });
    await assert.rejects(init(), new RegExp(`PCR 9: expected ${'09'.repeat(32)}, got ${'ee'.repeat(32)}`));
    await waitUntil(() => node!.unsealed === 1);
    assert.equal(node.received.length, 0);
    assert.equal((await readState(ws)).clusterValues.clusterID, '');
  });

  it('reuses the master secret and salt of an interrupted init, so the node gets the same secrets again', async () => {
    node = await startStandInNode({ issuer: new StandInIssuer({ ...NODE_PCRS, '4': 'ee'.repeat(32) }) });
    await assert.rejects(init());
    const secret = await fs.readFile(path.join(ws, MASTER_SECRET_FILE));
    const salt = (await readState(ws)).clusterValues.measurementSalt;
    await node.close();
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS) });
    await init();
    assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);
    assert.equal(Buffer.from(node.received[0].measurementSalt).toString('hex'), salt);
  });

  it("writes the node's log to constellation-cluster.log when the node fails", async () => {
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS), init: 'fail' });
    await assert.rejects(init(), (err: Error & { hint?: string }) => {
      assert.match(err.message, /failed to initialize the cluster: the backend broke/);
      assert.match(err.hint ?? '', /constellation-cluster\.log/);
      assert.match(err.hint ?? '', /run `constellation init` again/);
      return true;
    });
    assert.equal(await fs.readFile(path.join(ws, CLUSTER_LOG_FILE), 'utf8'), 'node log line 1\nnode log line 2\n');
  });

  it('refuses a master secret that does not belong to the initialized cluster in the state', async () => {
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS) });
    await init();
    const state = await readState(ws);
    state.clusterValues.clusterID = 'ab'.repeat(32);
    await writeState(ws, state);
    await assert.rejects(init(), (err: Error & { hint?: string }) => {
      assert.match(err.message, /does not belong to the cluster/);
      assert.match(err.hint ?? '', /constellation terminate/);
      return true;
    });
  });

  it('refuses a workspace without infrastructure', async () => {
    const state = await readState(ws);
    state.infrastructure.clusterEndpoint = '';
    await writeState(ws, state);
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS) });
    await assert.rejects(init(), /creation did not finish/);
    assert.equal(
      await fs.access(masterSecretPath(ws)).then(
        () => true,
        () => false,
      ),
      false,
      'no master secret is made for nothing',
    );
  });

  it('moves a different existing kubeconfig aside instead of overwriting it', async () => {
    await fs.writeFile(path.join(ws, ADMIN_CONF_FILE), 'an older cluster\n');
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS), kubernetesBackend: 'kubeadm' });
    const result = await init();
    assert.ok(result.previousKubeconfigFile);
    assert.equal(await fs.readFile(result.previousKubeconfigFile, 'utf8'), 'an older cluster\n');
    assert.equal(await fs.readFile(path.join(ws, ADMIN_CONF_FILE), 'utf8'), KUBECONFIG);
    assert.equal((await fs.stat(path.join(ws, ADMIN_CONF_FILE))).mode & 0o777, 0o600);
  });
});

async function waitUntil(check: () => boolean): Promise<void> {
  await pollUntil(() => (check() ? true : undefined), { timeoutMs: 5_000, intervalMs: 10 });
}
