/**
 * Join-service impersonation (attack review, item 1): a process that listens on the join service's address
 * before the cluster's own does, accepts any node and seals it a ticket it made up. A node must not use such a
 * ticket: only a genuine join service of its cluster holds the join-service key whose public half the node's
 * metadata holds (docs/join-service.md).
 * Real swtpm nodes, the real join client; the impostor is our own join service with a made-up configuration.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startJoinService, type JoinServiceHandle } from '../../joinservice/server.js';
import type { Validator } from '../../lib/attestation/types.js';
import { createLogger } from '../../lib/logging/index.js';
import { makeTestStore } from '../joinservice/support/test-store.js';
import { cliInit, getStatus, TestCluster } from './support/test-cluster.js';
import { imageMeasurements } from '../support/measurements.js';
import { pollUntil } from '../../lib/poll.js';
import { requireTool } from '../support/require-tool.js';

const hasSwtpm = spawnSync('swtpm', ['--version'], { stdio: 'ignore' }).status === 0;

/** The impostor checks nothing: any document passes (its userData is taken as bound). */
const acceptAnything: Validator = {
  variant: 'local-vtpm',
  validate: async (document) => ({
    userData: new Uint8Array(Buffer.from(document.userData, 'base64')),
    pcrs: new Map(),
    comparisons: [],
    warnings: [],
  }),
};

describe('bootstrapper: a join service impostor on the join service address', function () {
  this.timeout(60_000);
  let cluster: TestCluster;
  let impostor: JoinServiceHandle | undefined;
  const impostorLog: string[] = [];

  before(async function () {
    requireTool(this, hasSwtpm, 'swtpm');
    cluster = await TestCluster.create();
  });
  after(async () => {
    await impostor?.close();
    await cluster?.close();
  });

  it("a node does not use the impostor's tickets (no lock, no disk, PCR 15 zero) and joins the real cluster once it is up", async () => {
    const fake = await makeTestStore(imageMeasurements());
    impostor = await startJoinService({
      host: '127.0.0.70',
      port: cluster.joinPort,
      store: fake.store,
      validatorDeps: {},
      createValidator: () => acceptAnything,
      // An impostor names whatever the node's certificate request asks for.
      instanceAddresses: async () => ['127.0.0.71'],
      logger: createLogger((line) => impostorLog.push(line)),
    });
    cluster.provider.loadBalancer = '127.0.0.70';
    const worker = await cluster.startNode({ name: 'w-0', ip: '127.0.0.71', role: 'worker' });
    // The impostor hands out tickets; the node turns each down.
    await pollUntil(
      () => worker.log.some((l) => l.includes("is not signed with this cluster's join-service key")) || undefined,
      {
        timeoutMs: 20_000,
        intervalMs: 50,
        onTimeout: () => assert.fail(`the node never got an impostor's ticket:\n${worker.log.join('\n')}`),
      },
    );
    assert.ok(
      impostorLog.some((l) => l.includes('join ticket issued')),
      'the impostor did seal a ticket',
    );
    assert.equal(worker.bootstrapper.lock.locked, false);
    assert.equal(await worker.disk.isFormatted(), false, "no disk was formatted with the impostor's key");
    assert.ok((await worker.pcr(15)).equals(Buffer.alloc(32)), 'PCR 15 is still zero');
    assert.equal((await getStatus(worker.address(worker.bootstrapper.ports.verify))).state, 'waiting');

    // The real cluster comes up; the load balancer now leads to its join service.
    const cp = await cluster.startNode({ name: 'cp-0', ip: '127.0.0.72', role: 'control-plane' });
    const init = await cliInit(cp.address(cp.bootstrapper.ports.init!), cluster.validator(), cluster.initSecrets());
    assert.equal(init.error, undefined, init.error?.message);
    cluster.provider.loadBalancer = '127.0.0.72';
    const joined = await worker.bootstrapper.status.waitFor('joined', 'failed');
    assert.equal(joined.state, 'joined', joined.reason);
    assert.equal(joined.clusterId, Buffer.from(init.result!.clusterId).toString('hex'));
  });
});
