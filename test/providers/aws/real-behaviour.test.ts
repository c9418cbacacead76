/**
 * The AWS provider against the fake where the fake behaves as AWS documents and our code used to assume better:
 * EC2 eventual consistency after a create, targets in zones the load balancer is not enabled in, io2 volumes without
 * Iops, terminate that must confirm, and the target health a drain waits for.
 */
import assert from 'node:assert/strict';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, createRequest, fakeOptions } from './support.js';

describe('aws provider: as AWS behaves', function () {
  this.timeout(60_000);
  let fake: FakeAws;
  afterEach(async () => {
    await fake?.close();
  });

  it('creates while EC2 answers *.NotFound for what it made moments ago, retrying those calls only', async () => {
    // Counted in calls, not time: the first call naming each new resource misses it, however late it comes on a loaded
    // machine (a time window of 150 ms let a slow run meet no NotFound at all).
    fake = await startFakeAws({ lroMs: 5, consistencyMisses: 1 });
    const infra = new AwsInfrastructure(fakeOptions(fake, { retryDelayMs: 20 }));
    const ctx = context();
    await infra.create(createRequest(), ctx);
    const notFound = fake.requests.filter(
      (r) =>
        /NotFound$/.test(r.error ?? '') || (r.error === 'ValidationError' && r.action === 'CreateAutoScalingGroup'),
    );
    assert.ok(notFound.length > 0, 'the fake answered NotFound for a fresh resource');
    assert.ok(
      notFound.some((r) => r.error === 'InvalidGroup.NotFound' && r.action === 'AuthorizeSecurityGroupIngress'),
      notFound.map((r) => `${r.action}:${r.error}`).join(' '),
    );
    // Listing filters by instance id, so instances EC2 does not know yet are left out, not an error; they appear.
    let running = 0;
    for (let i = 0; i < 50 && running < 5; i++) {
      running = (await infra.listInstances(ctx)).filter((x) => x.state === 'running').length;
      if (running < 5) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(running, 5);
    fake.state.caughtUp(); // terminate comes later than any consistency window
    await infra.terminate(ctx);
    assert.deepEqual(fake.live(), []);
  });

  it('does not retry a NotFound for ever: a resource that never appears ends create naming it', async () => {
    fake = await startFakeAws({ lroMs: 5 });
    fake.fail({
      action: 'AuthorizeSecurityGroupIngress',
      code: 'InvalidGroup.NotFound',
      message: "The security group 'sg-1' does not exist",
      times: 1000,
    });
    const infra = new AwsInfrastructure(fakeOptions(fake, { retryDelayMs: 5, consistencyTimeoutMs: 2000 }));
    const ctx = context();
    await assert.rejects(infra.create(createRequest(), ctx), /InvalidGroup\.NotFound/);
    const tries = fake.calls('AuthorizeSecurityGroupIngress').length;
    assert.ok(tries > 1 && tries < 20, `bounded retries with backoff (${tries})`);
    await infra.terminate(ctx);
  });

  it('leaves a target in a zone the load balancer is not enabled in unused (Target.NotInUse), even with cross-zone on', async () => {
    fake = await startFakeAws({ lroMs: 5 });
    const request = createRequest();
    request.nodeGroups[0]!.zone = 'us-east-2b';
    const ctx = context();
    await new AwsInfrastructure(fakeOptions(fake)).create(request, ctx);
    // Take the control plane's zone out of the load balancer, as a load balancer made in the config's zone only was.
    const lb = [...fake.state.loadBalancers.values()][0]!;
    lb.subnetMappings = lb.subnetMappings.filter((m) => fake.state.subnets.get(m.subnetId)!.zone === 'us-east-2a');
    const { ElasticLoadBalancingV2Client, DescribeTargetHealthCommand } =
      await import('@aws-sdk/client-elastic-load-balancing-v2');
    const elb = new ElasticLoadBalancingV2Client({
      region: 'us-east-2',
      endpoint: fake.url,
      credentials: fakeOptions(fake).credentials,
    });
    try {
      const tg = [...fake.state.targetGroups.values()][0]!;
      const out = await elb.send(new DescribeTargetHealthCommand({ TargetGroupArn: tg.arn }));
      assert.equal(out.TargetHealthDescriptions?.length, 3);
      assert.ok(
        out.TargetHealthDescriptions!.every(
          (t) => t.TargetHealth?.State === 'unused' && t.TargetHealth.Reason === 'Target.NotInUse',
        ),
      );
    } finally {
      elb.destroy();
    }
  });

  it('a launch template with an io2 disk and no Iops fails every launch (the provider now sets Iops)', async () => {
    fake = await startFakeAws({ lroMs: 5 });
    const request = createRequest();
    request.nodeGroups[1]!.stateDiskType = 'io2';
    const ctx = context();
    await new AwsInfrastructure(fakeOptions(fake)).create(request, ctx);
    const lt = [...fake.state.launchTemplates.values()].find((t) => t.name.includes('worker'))!;
    const ebs = (lt.data.BlockDeviceMapping as { Ebs: Record<string, string> }[])[0]!.Ebs;
    assert.deepEqual([ebs.VolumeType, ebs.Iops], ['io2', '3000']);
    const groups = [...fake.state.autoScalingGroups.values()];
    assert.ok(groups.every((g) => g.activities.every((a) => a.statusCode === 'Successful')));
  });

  it('terminate waits until every instance of the cluster is terminated and no elastic IP is left', async () => {
    fake = await startFakeAws({ lroMs: 30 });
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const ctx = context();
    await infra.create(createRequest(), ctx);
    await infra.terminate(ctx);
    assert.ok(
      fake.calls('DescribeInstances').some((c) => JSON.stringify(c.params).includes('constellation-uid')),
      'asked EC2 for what is left of the cluster',
    );
    assert.ok([...fake.state.instances.values()].every((i) => fake.state.instanceState(i) === 'terminated'));
    assert.deepEqual(fake.live(), []);
  });
});
