import assert from 'node:assert/strict';
import { after, before, describe, it } from 'mocha';
import { AwsNodeMetadata } from '../../../providers/aws/metadata.js';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, createRequest, fakeOptions, INIT_SECRET_HASH, JOIN_SERVICE_KEY } from './support.js';

describe('aws provider: node metadata', function () {
  let fake: FakeAws;

  before(async () => {
    fake = await startFakeAws({ lroMs: 5 });
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
    // A second cluster in the same region must not show up as peers.
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest({ uid: 'other1', name: 'other' }), context());
    await new Promise((r) => setTimeout(r, 10)); // instances leave `pending`
  });
  after(async () => {
    await fake.close();
  });

  function controlPlaneInstance(uid = 'a1b2c3d4') {
    return [...fake.state.instances.values()].find(
      (i) => i.tags['constellation-uid'] === uid && i.tags['constellation-role'] === 'control-plane',
    )!;
  }

  it('answers self, peers, load balancer and init secret hash from IMDSv2 and the EC2/ELB APIs', async () => {
    const me = controlPlaneInstance();
    fake.imds.instanceId = me.id;
    const metadata = new AwsNodeMetadata(fakeOptions(fake));

    const self = await metadata.self();
    assert.equal(self.providerId, `aws:///us-east-2a/${me.id}`);
    assert.equal(self.role, 'control-plane');
    assert.equal(self.vpcIp, me.privateIp);
    assert.match(self.name, /^ip-192-168-.*\.us-east-2\.compute\.internal$/);

    const peers = await metadata.peers();
    assert.equal(peers.length, 5);
    assert.ok(peers.some((p) => p.providerId === self.providerId));

    const lb = [...fake.state.loadBalancers.values()].find((l) => l.tags['constellation-uid'] === 'a1b2c3d4')!;
    assert.equal(await metadata.loadBalancerEndpoint(), lb.dnsName);
    assert.equal(await metadata.initSecretHash(), INIT_SECRET_HASH);
    assert.equal(await metadata.joinServiceKey(), JOIN_SERVICE_KEY);
    assert.ok(fake.imds.tokens.size >= 1, 'IMDSv2 session token used');
  });

  it('fails clearly when the metadata service does not know the instance', async () => {
    fake.imds.instanceId = undefined;
    const metadata = new AwsNodeMetadata(fakeOptions(fake));
    await assert.rejects(metadata.self(), /instance metadata .*HTTP 404/);
  });
});
