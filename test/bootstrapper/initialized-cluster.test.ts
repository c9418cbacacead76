/**
 * A control plane of a cluster that is already initialized never serves Init (issue 20, item 1): the provider's
 * metadata stops carrying the init-secret hash once `init` succeeded (docs/join-service.md). Real swtpm nodes,
 * gRPC on loopback addresses.
 */
import assert from 'node:assert/strict';
import { cliInit, TestCluster } from './support/test-cluster.js';

describe('bootstrapper: a control plane of an initialized cluster', function () {
  this.timeout(60_000);
  let cluster: TestCluster | undefined;

  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it('starts no init server when its metadata carries no init-secret hash, and says so', async () => {
    cluster = await TestCluster.create();
    cluster.provider.initSecretHash = '';
    const cp = await cluster.startNode({ name: 'cp-1', ip: '127.0.0.81', role: 'control-plane' });
    assert.equal(cp.bootstrapper.ports.init, undefined);
    assert.ok(cp.log.some((l) => l.includes('this node serves no Init')));
  });

  it('refuses Init with the right init secret once the metadata dropped the hash, and stays unlocked', async () => {
    cluster = await TestCluster.create();
    const cp = await cluster.startNode({ name: 'cp-0', ip: '127.0.0.82', role: 'control-plane' });
    cluster.provider.initSecretHash = '';
    const outcome = await cliInit(cp.address(cp.bootstrapper.ports.init!), cluster.validator(), cluster.initSecrets());
    assert.equal(outcome.result, undefined);
    assert.match(outcome.error!.message, /init secret is wrong/);
    assert.equal(cp.bootstrapper.lock.locked, false);
    assert.equal(await cp.disk.isFormatted(), false);
  });
});
