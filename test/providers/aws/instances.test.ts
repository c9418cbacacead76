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
    assert.ok(
      instances.every((i) => i.nodeGroup === (i.role === 'control-plane' ? 'control_plane_default' : 'worker_default')),
    );
    assert.ok(instances.every((i) => /^192\.168\./.test(i.privateIp) && i.id.startsWith('i-')));
  });

  it('scales a node group through its desired capacity, and names the groups for an unknown one', async () => {
    await infra.scaleNodeGroup('worker_default', 12, ctx);
    const [update] = fake.calls('UpdateAutoScalingGroup');
    assert.equal(update.params.DesiredCapacity, '12');
    assert.equal(update.params.MaxSize, '12', 'the maximum grows with the request');
    assert.equal((await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'worker_default').length, 12);
    await infra.scaleNodeGroup('worker_default', 2, ctx);
    await assert.rejects(
      infra.scaleNodeGroup('gpu', 1, ctx),
      (e: UserError) => /"gpu"/.test(e.message) && /worker_default/.test(e.hint ?? ''),
    );
  });

  it('adds an instance: a new launch template version with the image new nodes boot, one more in service, returned', async () => {
    const withImage = new AwsInfrastructure(fakeOptions(fake, { image: 'ami-0feedbeef0000001' }));
    fake.state.images.set('ami-0feedbeef0000001', { id: 'ami-0feedbeef0000001', bootMode: 'uefi', tpmSupport: 'v2.0' });
    const before = (await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'control_plane_default');
    const added = await withImage.addInstance('control_plane_default', ctx);
    assert.ok(!before.some((i) => i.id === added.id));
    assert.equal(added.state, 'running');
    assert.equal(added.image, 'ami-0feedbeef0000001');
    assert.ok(
      added.createdAt && before.every((i) => i.createdAt! <= added.createdAt!),
      "createdAt is EC2's LaunchTime",
    );
    const [version] = fake.calls('CreateLaunchTemplateVersion');
    assert.equal(version.params.SourceVersion, '$Latest');
    assert.equal((version.params.LaunchTemplateData as { ImageId: string }).ImageId, 'ami-0feedbeef0000001');
    assert.equal(
      (await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'control_plane_default').length,
      before.length + 1,
    );
    await infra.removeInstance(added.id, ctx);
  });

  it('removes exactly the instance named, lowering the desired capacity, and waits until EC2 reports it terminated', async () => {
    const members = (await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'worker_default');
    const chosen = members[0];
    await infra.removeInstance(chosen.id, ctx);
    const [call] = fake.calls('TerminateInstanceInAutoScalingGroup').slice(-1);
    assert.equal(call.params.InstanceId, chosen.id);
    assert.equal(call.params.ShouldDecrementDesiredCapacity, 'true');
    assert.equal(fake.state.instanceState(fake.state.instances.get(chosen.id)!), 'terminated');
    const after = (await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'worker_default');
    assert.deepEqual(
      after.map((i) => i.id).sort(),
      members
        .slice(1)
        .map((i) => i.id)
        .sort(),
      'every other instance stays',
    );
    await infra.removeInstance(chosen.id, ctx); // again: gone already, no error
    await infra.scaleNodeGroup('worker_default', members.length, ctx);
  });

  it('drains a control plane: deregistered from every target group and waited for until it no longer drains', async () => {
    const [node] = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    await infra.drainInstance(node.id, ctx);
    const deregistered = fake.calls('DeregisterTargets');
    assert.equal(deregistered.length, 5, 'one per port');
    assert.ok(deregistered.every((c) => (c.params.Targets as { Id: string }[])[0].Id === node.id));
    const polled = fake.calls('DescribeTargetHealth');
    assert.ok(polled.length >= 5);
    for (const tg of fake.state.targetGroups.values()) assert.ok(tg.deregistered.has(node.id));
    await infra.removeInstance(node.id, ctx);
    await infra.scaleNodeGroup('control_plane_default', 3, ctx);
  });

  it('marks the cluster initialized: the hash tag empties on the groups, their launch templates and the running instances', async () => {
    await infra.markInitialized(ctx);
    for (const g of fake.state.autoScalingGroups.values())
      assert.equal(g.propagated['constellation-init-secret-hash'], '');
    for (const lt of fake.state.launchTemplates.values())
      assert.match(JSON.stringify(lt.data), /"Key":"constellation-init-secret-hash","Value":""/);
    const running = [...fake.state.instances.values()].filter((i) => fake.state.instanceState(i) === 'running');
    assert.ok(running.every((i) => i.tags['constellation-init-secret-hash'] === ''));
    const versions = fake.calls('CreateLaunchTemplateVersion').length;
    await infra.markInitialized(ctx);
    assert.equal(fake.calls('CreateLaunchTemplateVersion').length, versions, 'a second call makes no new version');
    // A node launched later reads no hash: it never serves Init.
    await infra.scaleNodeGroup('worker_default', 3, ctx);
    const fresh = [...fake.state.instances.values()]
      .filter((i) => fake.state.instanceState(i) !== 'terminated')
      .at(-1)!;
    assert.equal(fresh.tags['constellation-init-secret-hash'], '');
  });
});
