import assert from 'node:assert/strict';
import { after, before, describe, it } from 'mocha';
import { UserError } from '../../../lib/errors.js';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, createRequest, fakeOptions } from './support.js';

describe('aws provider: instances', function () {
  let fake: FakeAws;
  let infra: AwsInfrastructure;
  const ctx = context();

  before(async () => {
    fake = await startFakeAws({ lroMs: 20 });
    infra = new AwsInfrastructure(fakeOptions(fake));
    await infra.create(createRequest(), ctx);
  });
  after(async () => {
    await fake.close();
  });

  it('lists the instances of the recorded groups with role, group and address', async () => {
    const instances = await infra.listInstances(ctx);
    assert.equal(instances.length, 5);
    assert.equal(instances.filter((i) => i.role === 'control-plane').length, 3);
    assert.ok(instances.every((i) => i.nodeGroup === (i.role === 'control-plane' ? 'control_plane_default' : 'worker_default')));
    assert.ok(instances.every((i) => /^192\.168\./.test(i.privateIp) && i.id.startsWith('i-')));
  });

  it('scales a node group through its desired capacity, and names the groups for an unknown one', async () => {
    await infra.scaleNodeGroup('worker_default', 12, ctx);
    const [update] = fake.calls('UpdateAutoScalingGroup');
    assert.equal(update.params.DesiredCapacity, '12');
    assert.equal(update.params.MaxSize, '12', 'the maximum grows with the request');
    assert.equal((await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'worker_default').length, 12);
    await infra.scaleNodeGroup('worker_default', 2, ctx);
    await assert.rejects(infra.scaleNodeGroup('gpu', 1, ctx), (e: UserError) => /"gpu"/.test(e.message) && /worker_default/.test(e.hint ?? ''));
  });
});
