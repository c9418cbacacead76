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

  it('describes one instance, and says so when it does not exist', async () => {
    const [first] = await infra.listInstances(ctx);
    // The fake launches instances after a delay, so the state may move from pending to running between the reads.
    const { state: listedState, ...listed } = first;
    const { state: describedState, ...described } = await infra.describeInstance(first.id, ctx);
    assert.deepEqual(described, listed);
    assert.ok(listedState === describedState || (listedState === 'pending' && describedState === 'running'), `${listedState} -> ${describedState}`);
    await assert.rejects(infra.describeInstance('i-00000000000000fff', ctx), (e: Error) => e instanceof UserError && /i-00000000000000fff/.test(e.message));
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

  it('replaces an instance: a new one comes into service before the old one is terminated', async () => {
    const before = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    const old = before[0];
    const fresh = await infra.replaceInstance(old.id, ctx);
    assert.notEqual(fresh.id, old.id);
    assert.equal(fresh.nodeGroup, 'control_plane_default');
    assert.equal(fresh.state, 'running');
    const grow = fake.calls('UpdateAutoScalingGroup').at(-1)!;
    assert.equal(grow.params.DesiredCapacity, '4');
    const [terminate] = fake.calls('TerminateInstanceInAutoScalingGroup');
    assert.equal(terminate.params.InstanceId, old.id);
    assert.equal(terminate.params.ShouldDecrementDesiredCapacity, 'true');
    assert.ok(grow.at <= terminate.at);
    const group = [...fake.state.autoScalingGroups.values()].find((g) => g.name.includes('control-plane'))!;
    assert.equal(group.desired, 3, 'back to its size');
  });
});
