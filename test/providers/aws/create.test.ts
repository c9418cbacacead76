import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'mocha';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';
import { UserError } from '../../../lib/errors.js';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import { CreateFailedError } from '../../../providers/aws/errors.js';
import type { RecordedResource } from '../../../providers/contract.js';
import { startFakeAws, type FakeAws, type RecordedRequest } from '../../fakes/aws/server.js';
import { targetsBehind } from '../../fakes/aws/elb.js';
import { list, str, type Params } from '../../fakes/aws/wire.js';
import { context, createRequest, fakeOptions, INIT_SECRET_HASH } from './support.js';

const PORTS = ['6443', '9000', '30090', '30081', '9999'];

function only(fake: FakeAws, action: string): RecordedRequest[] {
  return fake.calls(action);
}

function tags(specs: Params[] | undefined, type: string): Record<string, string> {
  const spec = (specs ?? []).find((s) => str(s, 'ResourceType') === type);
  return Object.fromEntries(list(spec ?? {}, 'Tag').map((t) => [str(t, 'Key'), str(t, 'Value')]));
}

describe('aws provider: create', function () {
  let fake: FakeAws;

  beforeEach(async () => {
    fake = await startFakeAws({ lroMs: 20 });
  });
  afterEach(async () => {
    await fake.close();
  });

  it('creates network, security group, load balancer and one auto scaling group per node group, then terminate leaves nothing', async () => {
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const ctx = context();
    const result = await infra.create(createRequest(), ctx);

    const eip = [...fake.state.addresses.values()].find((a) => a.holder?.includes(':loadbalancer/'));
    const lb = [...fake.state.loadBalancers.values()][0];
    assert.equal(result.clusterEndpoint, eip?.publicIp);
    assert.equal(result.inClusterEndpoint, lb.dnsName);
    assert.deepEqual(result.apiServerCertSANs, [eip?.publicIp, lb.dnsName]);
    assert.equal(lb.type, 'network');
    assert.equal(lb.scheme, 'internet-facing');

    assert.equal(fake.state.vpcs.size, 1);
    assert.equal(fake.state.subnets.size, 2);
    assert.equal(fake.state.natGateways.size, 1);
    assert.equal(fake.state.autoScalingGroups.size, 2);
    const instances = [...fake.state.instances.values()];
    assert.equal(instances.length, 5, '3 control-plane and 2 worker instances');
    // Every resource the cloud holds (but the instances the groups launched) is in the journal, and nothing else.
    const attachments = ['aws:internet-gateway-attachment', 'aws:route', 'aws:route-table-association'];
    const recorded = (await ctx.journal.list()).filter((r) => !attachments.includes(r.kind)).map((r) => r.id);
    const live = fake
      .live()
      .filter((r) => !r.startsWith('instance '))
      .map((r) => r.split(' ')[1]);
    assert.deepEqual(recorded.sort(), live.sort());

    await infra.terminate(ctx);
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('sends the confidential settings, state disk, metadata options and node tags in the launch templates', async () => {
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
    const templates = only(fake, 'CreateLaunchTemplate');
    assert.equal(templates.length, 2);
    for (const t of templates) {
      const data = t.params.LaunchTemplateData as Params;
      assert.deepEqual(data.CpuOptions, { AmdSevSnp: 'enabled' });
      assert.equal(str(data, 'InstanceType'), 'm6a.xlarge');
      assert.deepEqual(data.MetadataOptions, {
        HttpEndpoint: 'enabled',
        HttpTokens: 'required',
        HttpPutResponseHopLimit: '2',
      });
      const [disk] = list(data, 'BlockDeviceMapping');
      assert.equal(str(disk, 'DeviceName'), '/dev/sdb');
      assert.equal((disk.Ebs as Params).VolumeType, 'gp3');
      assert.equal((disk.Ebs as Params).Encrypted, 'true');
      const instanceTags = tags(list(data, 'TagSpecification'), 'instance');
      assert.equal(instanceTags['constellation-uid'], 'a1b2c3d4');
      assert.equal(instanceTags['constellation-init-secret-hash'], INIT_SECRET_HASH);
      assert.equal(instanceTags.team, 'blue', 'the config tags are on every resource');
    }
    const cp = templates.find(
      (t) =>
        tags(list(t.params.LaunchTemplateData as Params, 'TagSpecification'), 'instance')['constellation-role'] ===
        'control-plane',
    )!;
    const cpData = cp.params.LaunchTemplateData as Params;
    assert.equal((list(cpData, 'BlockDeviceMapping')[0].Ebs as Params).VolumeSize, '30');
    assert.deepEqual(cpData.IamInstanceProfile, { Name: 'demo-control-plane-profile' });
    assert.equal(
      tags(list(cpData, 'TagSpecification'), 'instance')['constellation-node-group'],
      'control_plane_default',
    );

    // The instances the groups launched carry the tags the node side reads.
    for (const i of fake.state.instances.values()) {
      assert.equal(i.tags['constellation-uid'], 'a1b2c3d4');
      assert.ok(['control-plane', 'worker'].includes(i.tags['constellation-role']));
      assert.equal(i.tags['constellation-init-secret-hash'], INIT_SECRET_HASH);
    }
  });

  it('opens the ports of docs/design.md#ports with a health-checked target group and listener each; only the control plane is registered', async () => {
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
    const [rules] = only(fake, 'AuthorizeSecurityGroupIngress');
    const perms = list(rules.params, 'IpPermissions');
    assert.deepEqual(
      perms
        .filter((p) => p.IpProtocol === 'tcp' && p.FromPort === p.ToPort)
        .map((p) => p.FromPort)
        .sort(),
      [...PORTS].sort(),
    );
    assert.ok(
      perms.some((p) => p.IpProtocol === '-1' && list(p, 'IpRanges')[0].CidrIp === '192.168.0.0/16'),
      'cluster-internal traffic',
    );

    const groups = [...fake.state.targetGroups.values()];
    assert.deepEqual(groups.map((g) => String(g.port)).sort(), [...PORTS].sort());
    for (const g of groups) {
      assert.equal(g.protocol, 'TCP');
      assert.equal(g.healthCheck.protocol, g.port === 6443 ? 'HTTPS' : 'TCP');
      if (g.port === 6443) assert.equal(g.healthCheck.path, '/readyz');
      assert.equal(g.tags['constellation-uid'], 'a1b2c3d4');
    }
    assert.deepEqual([...fake.state.listeners.values()].map((l) => String(l.port)).sort(), [...PORTS].sort());
    const asgs = only(fake, 'CreateAutoScalingGroup');
    const cp = asgs.find((a) => str(a.params, 'AutoScalingGroupName')!.includes('control-plane'))!;
    const worker = asgs.find((a) => str(a.params, 'AutoScalingGroupName')!.includes('worker'))!;
    assert.equal(list(cp.params, 'TargetGroupARNs').length, 5);
    assert.equal(list(worker.params, 'TargetGroupARNs').length, 0);
    assert.equal(str(cp.params, 'DesiredCapacity'), '3');
    // Every EC2 resource is tagged with the cluster's uid at creation.
    for (const action of [
      'CreateVpc',
      'CreateSubnet',
      'CreateInternetGateway',
      'AllocateAddress',
      'CreateNatGateway',
      'CreateRouteTable',
      'CreateSecurityGroup',
    ]) {
      for (const r of only(fake, action)) {
        const [spec] = list(r.params, 'TagSpecification');
        assert.equal(tags([spec], str(spec, 'ResourceType')!)['constellation-uid'], 'a1b2c3d4', action);
      }
    }
  });

  it('opens the NodePort range 30000-32767 from anywhere, as upstream', async () => {
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
    const perms = list(only(fake, 'AuthorizeSecurityGroupIngress')[0]!.params, 'IpPermissions');
    const nodePorts = perms.find((p) => p.FromPort === '30000')!;
    assert.deepEqual(
      [nodePorts.IpProtocol, nodePorts.ToPort, str(list(nodePorts, 'IpRanges')[0]!, 'CidrIp')],
      ['tcp', '32767', '0.0.0.0/0'],
    );
  });

  describe('three zones', () => {
    const threeZones = () => {
      const request = createRequest();
      request.nodeGroups = [
        {
          name: 'control_plane_default',
          role: 'control-plane',
          zone: 'us-east-2b',
          instanceType: 'm6a.xlarge',
          stateDiskSizeGB: 30,
          stateDiskType: 'gp3',
          initialCount: 3,
        },
        {
          name: 'worker_b',
          role: 'worker',
          zone: 'us-east-2b',
          instanceType: 'm6a.xlarge',
          stateDiskSizeGB: 50,
          stateDiskType: 'gp3',
          initialCount: 1,
        },
        {
          name: 'worker_c',
          role: 'worker',
          zone: 'us-east-2c',
          instanceType: 'm6a.xlarge',
          stateDiskSizeGB: 50,
          stateDiskType: 'gp3',
          initialCount: 1,
        },
      ];
      return request;
    };

    it('stays within the default quota of five elastic IPs: one per NAT gateway, one for the load balancer', async () => {
      const result = await new AwsInfrastructure(fakeOptions(fake)).create(threeZones(), context());
      assert.equal(fake.state.natGateways.size, 3);
      assert.equal(fake.state.addresses.size, 4);
      const lb = [...fake.state.loadBalancers.values()][0]!;
      const zoneOf = (m: { subnetId: string }) => fake.state.subnets.get(m.subnetId)!.zone;
      assert.deepEqual(
        lb.subnetMappings.map(zoneOf),
        ['us-east-2a', 'us-east-2b'],
        "the config's zone and the control plane's",
      );
      assert.equal(fake.state.addresses.get(lb.subnetMappings[0]!.allocationId!)!.publicIp, result.clusterEndpoint);
      assert.equal(
        lb.subnetMappings[1]!.allocationId,
        undefined,
        "AWS assigns the other zone's address: no elastic IP",
      );
    });

    it("refuses, before anything is made, a create whose elastic IPs exceed the region's quota", async () => {
      const request = threeZones();
      request.nodeGroups.push({
        name: 'worker_d',
        role: 'worker',
        zone: 'us-east-2d',
        instanceType: 'm6a.xlarge',
        stateDiskSizeGB: 50,
        stateDiskType: 'gp3',
        initialCount: 1,
      });
      // Four zones need five: the default quota, so one address someone else holds makes it too many.
      fake.state.addresses.set('eipalloc-0other', {
        allocationId: 'eipalloc-0other',
        publicIp: '198.51.100.7',
        tags: {},
      });
      await new AwsInfrastructure(fakeOptions(fake)).create(request, context()).then(
        () => assert.fail('create must refuse'),
        (e: UserError) => {
          assert.match(
            e.message,
            /needs 5 more elastic IPs in us-east-2 \(one per zone for its NAT gateways: us-east-2a, us-east-2b, us-east-2c, us-east-2d; one for the load balancer\), but 1 of the quota of 5 are in use/,
          );
          assert.match(e.hint ?? '', /Nothing was created/);
        },
      );
      assert.deepEqual(fake.live(), ['address eipalloc-0other'], 'nothing was made');
      assert.equal(only(fake, 'CreateVpc').length, 0);
      assert.equal(only(fake, 'AllocateAddress').length, 0);
    });

    it("reaches control-plane nodes in another zone than the endpoint's: the load balancer is enabled there, cross-zone on", async () => {
      const result = await new AwsInfrastructure(fakeOptions(fake)).create(threeZones(), context());
      const controlPlane = [...fake.state.instances.values()].filter(
        (i) => i.tags['constellation-role'] === 'control-plane',
      );
      assert.ok(controlPlane.every((i) => i.zone === 'us-east-2b'));
      for (const port of PORTS)
        assert.deepEqual(
          targetsBehind(fake.state, result.clusterEndpoint, Number(port)).sort(),
          controlPlane.map((i) => i.id).sort(),
          `port ${port}`,
        );
    });
  });

  describe('waiting for the auto scaling groups', () => {
    it('returns only when every group runs its desired capacity, reporting progress', async () => {
      const messages: string[] = [];
      await new AwsInfrastructure(fakeOptions(fake)).create(
        createRequest(),
        context(undefined, { progress: (m) => messages.push(m) }),
      );
      const live = [...fake.state.instances.values()].filter((i) => fake.state.instanceState(i) === 'running');
      assert.equal(live.length, 5, 'all instances are in service when create returns');
      assert.ok(
        messages.includes('node group control_plane_default: 3 of 3 instances in service'),
        messages.join('\n'),
      );
      assert.ok(messages.includes('node group worker_default: 2 of 2 instances in service'));
    });

    it('waits through a launch that fails for want of capacity, as AWS keeps trying, and reports it', async () => {
      const insufficient =
        'We currently do not have sufficient m6a.xlarge capacity in the Availability Zone you requested (us-east-2a). Our system will be working on provisioning additional capacity. Launching EC2 instance failed.';
      fake.state.launchFailures.set('demo-a1b2c3d4-worker', insufficient);
      const messages: string[] = [];
      const infra = new AwsInfrastructure(
        fakeOptions(fake, {
          sleep: async (ms) => {
            // The capacity comes back after the first poll.
            fake.state.launchFailures.delete('demo-a1b2c3d4-worker');
            await new Promise((r) => setTimeout(r, Math.min(ms, 30)));
          },
        }),
      );
      await infra.create(createRequest(), context(undefined, { progress: (m) => messages.push(m) }));
      assert.ok(
        messages.some((m) =>
          /worker_default: a launch failed, AWS keeps trying: We currently do not have sufficient/.test(m),
        ),
        messages.join('\n'),
      );
      assert.ok(messages.includes('node group worker_default: 2 of 2 instances in service'));
    });

    it("stops at once with EC2's message when a group cannot launch its instances for good, and terminate cleans up", async () => {
      const insufficient =
        'The requested configuration is currently not supported. Please check the documentation for supported configurations. Launching EC2 instance failed.';
      fake.state.launchFailures.set('demo-a1b2c3d4-worker', insufficient);
      const slept: number[] = [];
      const infra = new AwsInfrastructure(fakeOptions(fake, { sleep: async (ms) => void slept.push(ms) }));
      const ctx = context();
      const err = await infra.create(createRequest(), ctx).then(
        () => assert.fail('create must fail'),
        (e: unknown) => e as CreateFailedError,
      );
      assert.ok(err instanceof CreateFailedError, String(err));
      assert.match(
        err.message,
        /Node group worker_default could not launch its instances: The requested configuration is currently not supported/,
      );
      assert.ok(err.canRollBack);
      assert.ok(only(fake, 'DescribeScalingActivities').length >= 1);
      await infra.terminate(ctx);
      assert.deepEqual(fake.live(), []);
    });

    it('gives up after the capacity timeout on the injected clock, naming the group', async () => {
      let now = Date.now();
      const infra = new AwsInfrastructure(
        fakeOptions(fake, {
          capacityTimeoutMs: 60_000,
          pollIntervalMs: 10_000,
          clock: () => new Date(now),
          // Time passes only on this clock; the instances never come into service meanwhile.
          sleep: async (ms) => {
            now += ms;
          },
        }),
      );
      fake.state.bootMs = 3_600_000;
      const err = await infra.create(createRequest(), context()).then(
        () => assert.fail('create must fail'),
        (e: unknown) => e as CreateFailedError,
      );
      assert.match(
        err.message,
        /Node group (control_plane_default|worker_default) has 0 of [23] instances in service after 1 minutes/,
      );
      assert.ok(only(fake, 'DescribeAutoScalingGroups').length <= 2 * 8, 'polled every 10 s of the injected clock');
    });
  });

  it('aws-nitro-tpm: no SEV-SNP CPU option; an image without NitroTPM is refused before anything is made', async () => {
    await new AwsInfrastructure(fakeOptions(fake)).create(
      createRequest({ attestationVariant: 'aws-nitro-tpm', uid: 'nitro1' }),
      context(),
    );
    for (const t of only(fake, 'CreateLaunchTemplate'))
      assert.equal((t.params.LaunchTemplateData as Params).CpuOptions, undefined);

    fake.state.images.set('ami-legacy', { id: 'ami-legacy', bootMode: 'legacy-bios' });
    const ctx = context();
    await assert.rejects(
      new AwsInfrastructure(fakeOptions(fake)).create(createRequest({ image: 'ami-legacy', uid: 'legacy1' }), ctx),
      (err: Error) =>
        err instanceof UserError &&
        /ami-legacy/.test(err.message) &&
        /TpmSupport/.test(err.message) &&
        /uefi/.test(err.message),
    );
  });

  it('refuses an instance type without SEV-SNP and a missing instance profile before calling AWS', async () => {
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const request = createRequest();
    request.nodeGroups[1].instanceType = 'm5.xlarge';
    await assert.rejects(
      infra.create(request, context()),
      (err: Error) => err instanceof UserError && /worker_default.*m5\.xlarge/.test(err.message),
    );
    const noProfile = createRequest({ providerConfig: { region: 'us-east-2', zone: 'us-east-2a' } });
    await assert.rejects(
      infra.create(noProfile, context()),
      (err: UserError) => /iamProfileControlPlane/.test(err.message) && /iam create aws/.test(err.hint ?? ''),
    );
    assert.equal(fake.requests.length, 0);
  });

  it('a re-run of a finished create makes nothing new and returns the same endpoints', async () => {
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const ctx = context();
    const first = await infra.create(createRequest(), ctx);
    const made = fake.requests.filter((r) => /^(Create|Allocate|Attach|Associate)/.test(r.action)).length;
    const second = await infra.create(createRequest(), ctx);
    assert.deepEqual(second, first);
    assert.equal(fake.requests.filter((r) => /^(Create|Allocate|Attach|Associate)/.test(r.action)).length, made);
  });

  it('an interrupted create continues where it stopped', async () => {
    const abort = new AbortController();
    fake.onRequest = (r) => {
      if (r.action === 'CreateLoadBalancer') abort.abort(new Error('interrupted'));
    };
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const journal = new MemoryResourceJournal();
    await assert.rejects(
      infra.create(createRequest(), context(journal, { signal: abort.signal })),
      (e: CreateFailedError) => e instanceof CreateFailedError && /interrupted/.test(e.message) && e.canRollBack,
    );
    const afterFirst = await journal.list();
    assert.ok(afterFirst.some((r) => r.kind === 'aws:vpc'));
    assert.ok(!afterFirst.some((r) => r.kind === 'aws:autoscaling-group'), 'the run stopped half-way');

    fake.onRequest = undefined;
    const result = await infra.create(createRequest(), context(journal));
    assert.ok(result.clusterEndpoint);
    assert.equal(only(fake, 'CreateVpc').length, 1, 'the VPC of the first run is reused');
    assert.equal(fake.state.vpcs.size, 1);
    assert.equal(fake.state.loadBalancers.size, 1);
    assert.equal(fake.state.autoScalingGroups.size, 2);
    await infra.terminate(context(journal));
    assert.deepEqual(fake.live(), []);
  });

  for (const kind of [
    'aws:nat-gateway',
    'aws:load-balancer',
    'aws:launch-template',
    'aws:autoscaling-group',
    'aws:security-group',
    'aws:target-group',
  ]) {
    it(`a crash after AWS accepted a ${kind.slice(4)} but before it was recorded makes no duplicate on the re-run`, async () => {
      const journal = new CrashingJournal(kind);
      const infra = new AwsInfrastructure(fakeOptions(fake));
      await assert.rejects(
        infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal)),
        CreateFailedError,
      );
      await infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal));
      assert.equal(fake.state.natGateways.size, 1);
      assert.equal(fake.state.loadBalancers.size, 1);
      assert.equal(fake.state.launchTemplates.size, 2);
      assert.equal(fake.state.autoScalingGroups.size, 2);
      assert.equal(fake.state.securityGroups.size, 2, 'the VPC default group and ours');
      assert.equal(fake.state.targetGroups.size, 5);
      await infra.terminate(context(journal as unknown as MemoryResourceJournal));
      assert.deepEqual(fake.live(), []);
    });
  }

  it('terminate --by-tag also deletes resources the journal never recorded', async () => {
    const journal = new CrashingJournal('aws:vpc');
    const infra = new AwsInfrastructure(fakeOptions(fake));
    await assert.rejects(
      infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal)),
      CreateFailedError,
    );
    await infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal));
    assert.equal(fake.state.vpcs.size, 2, 'the unrecorded VPC of the crashed run is orphaned');
    await infra.terminate(context(journal as unknown as MemoryResourceJournal));
    assert.deepEqual(
      fake.live().map((r) => r.split(' ')[0]),
      ['vpc'],
      'only what the journal knew is deleted',
    );
    // The journal is empty now: the caller names the cluster (from the state file).
    const byUid = new AwsInfrastructure(fakeOptions(fake, { uid: 'a1b2c3d4', region: 'us-east-2' }));
    await byUid.terminate(context(journal as unknown as MemoryResourceJournal), { byTag: true });
    assert.deepEqual(fake.live(), []);
  });

  it('terminate --by-tag in one go: the journal names the cluster', async () => {
    const journal = new CrashingJournal('aws:subnet');
    const infra = new AwsInfrastructure(fakeOptions(fake));
    await assert.rejects(
      infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal)),
      CreateFailedError,
    );
    await infra.create(createRequest(), context(journal as unknown as MemoryResourceJournal));
    await infra.terminate(context(journal as unknown as MemoryResourceJournal), { byTag: true });
    assert.deepEqual(fake.live(), []);
  });

  it('retries throttled requests (EC2 503, ELB 400 Throttling, Auto Scaling 429)', async () => {
    fake.fail({
      action: 'CreateVpc',
      code: 'RequestLimitExceeded',
      message: 'Request limit exceeded.',
      status: 503,
      times: 2,
    });
    fake.fail({ action: 'CreateLoadBalancer', code: 'Throttling', message: 'Rate exceeded', status: 400 });
    fake.fail({
      action: 'CreateAutoScalingGroup',
      code: 'TooManyRequestsException',
      message: 'Rate exceeded',
      status: 429,
    });
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
    assert.equal(only(fake, 'CreateVpc').length, 3);
    assert.equal(only(fake, 'CreateLoadBalancer').length, 2);
    assert.equal(only(fake, 'CreateAutoScalingGroup').length, 3, 'two groups, one retried');
    assert.equal(fake.state.vpcs.size, 1);
  });

  it("reports a permanent error with AWS's message and offers a roll back that deletes everything made", async () => {
    fake.fail({
      action: 'CreateLoadBalancer',
      code: 'TooManyLoadBalancers',
      message: 'The quota for the number of load balancers has been reached',
    });
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const ctx = context();
    const err = await infra.create(createRequest(), ctx).then(
      () => assert.fail('create must fail'),
      (e: unknown) => e as CreateFailedError,
    );
    assert.ok(err instanceof CreateFailedError);
    assert.equal(err.canRollBack, true);
    assert.match(err.message, /TooManyLoadBalancers: The quota for the number of load balancers has been reached/);
    assert.match(err.message, /load balancer/);
    assert.match(err.hint ?? '', /constellation terminate/);
    assert.equal(only(fake, 'CreateLoadBalancer').length, 1, 'a permanent error is not retried');
    assert.ok((await ctx.journal.list()).length > 0);

    await infra.terminate(ctx);
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('terminate tolerates resources already gone and retries deletes refused while something still uses them', async () => {
    const infra = new AwsInfrastructure(fakeOptions(fake));
    const ctx = context();
    await infra.create(createRequest(), ctx);
    // Deleted behind our back.
    for (const l of [...fake.state.listeners.keys()]) fake.state.listeners.delete(l);
    fake.state.launchTemplates.clear();
    fake.fail({
      action: 'DeleteSubnet',
      code: 'DependencyViolation',
      message: 'The subnet has dependencies and cannot be deleted.',
      times: 2,
    });
    await infra.terminate(ctx);
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('refuses a workspace whose journal belongs to another cluster', async () => {
    const journal = new MemoryResourceJournal([
      { kind: 'aws:vpc', id: 'vpc-other', name: 'vpc', data: { region: 'us-east-2', uid: 'other' } },
    ]);
    await assert.rejects(
      new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context(journal)),
      /another cluster \(uid other\)/,
    );
  });
});

/** A journal that fails (like a crash) on the first record of one kind: AWS accepted it, the workspace forgot it. */
class CrashingJournal extends MemoryResourceJournal {
  private crashed = false;
  constructor(private readonly kind: string) {
    super();
  }
  override async record(resource: RecordedResource): Promise<void> {
    if (!this.crashed && resource.kind === this.kind) {
      this.crashed = true;
      throw new Error('simulated crash before recording');
    }
    return super.record(resource);
  }
}
