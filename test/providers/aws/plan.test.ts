/** The AWS create plan (providers/aws/plan.ts), without I/O: order, journal dependencies, requests, refusals. */
import assert from 'node:assert/strict';
import { UserError } from '../../../lib/errors.js';
import { topologicalOrder } from '../../../providers/common/task-graph.js';
import { planCreate, type AwsStep, type ResourceStep } from '../../../providers/aws/plan.js';
import { createRequest } from './support.js';

/** Stands in for the ids AWS gives: the id of step s is "<s>". */
const id = (step: string) => `<${step}>`;

function byId(steps: AwsStep[]): Map<string, AwsStep> {
  return new Map(steps.map((s) => [s.id, s]));
}

function resource<K extends ResourceStep['kind']>(
  steps: Map<string, AwsStep>,
  stepId: string,
  kind: K,
): Extract<ResourceStep, { kind: K }> {
  const step = steps.get(stepId);
  assert.equal(step?.kind, kind, stepId);
  return step as Extract<ResourceStep, { kind: K }>;
}

describe('aws plan', function () {
  it('is a graph of known steps without a cycle, and each record depends only on resources made before its step', function () {
    const { steps } = planCreate(createRequest());
    assert.equal(topologicalOrder(steps.map((s) => ({ id: s.id, deps: s.deps }))).length, steps.length);
    const all = byId(steps);
    const before = (stepId: string): Set<string> => new Set(all.get(stepId)!.deps.flatMap((d) => [d, ...before(d)]));
    for (const s of steps) {
      if ('dependsOn' in s)
        assert.deepEqual(
          s.dependsOn.filter((d) => !before(s.id).has(d)),
          [],
          s.id,
        );
    }
  });

  it('starts the nodes after their NAT route, and registers only the control plane with the target groups', function () {
    const steps = byId(planCreate(createRequest()).steps);
    const cp = resource(steps, 'autoscaling-group-control_plane_default', 'aws:autoscaling-group');
    const worker = resource(steps, 'autoscaling-group-worker_default', 'aws:autoscaling-group');
    const network = [
      'launch-template-worker_default',
      'subnet-private-us-east-2a',
      'route-private-us-east-2a',
      'association-private-us-east-2a',
    ];
    assert.deepEqual(worker.deps, network);
    assert.deepEqual(cp.deps, [
      ...network.map((d) => d.replace('worker_default', 'control_plane_default')),
      ...[6443, 9000, 30090, 30081, 9999].map((p) => `target-group-${p}`),
    ]);
    assert.deepEqual(cp.input(id).TargetGroupARNs, [
      '<target-group-6443>',
      '<target-group-9000>',
      '<target-group-30090>',
      '<target-group-30081>',
      '<target-group-9999>',
    ]);
    assert.equal(worker.input(id).TargetGroupARNs, undefined);
    assert.equal(worker.input(id).VPCZoneIdentifier, '<subnet-private-us-east-2a>');
    assert.deepEqual(worker.data, { nodeGroup: 'worker_default', role: 'worker', zone: 'us-east-2a' });
  });

  it('waits for the internet gateway attachment before NAT and the public route, which terminate deletes before the gateway', function () {
    const steps = byId(planCreate(createRequest()).steps);
    const nat = resource(steps, 'nat-gateway-us-east-2a', 'aws:nat-gateway');
    assert.deepEqual(nat.deps, [
      'subnet-public-us-east-2a',
      'elastic-ip-nat-us-east-2a',
      'internet-gateway-attachment',
    ]);
    assert.deepEqual(nat.input(id), {
      SubnetId: '<subnet-public-us-east-2a>',
      AllocationId: '<elastic-ip-nat-us-east-2a>',
      ConnectivityType: 'public',
      ClientToken: 'a1b2c3d4-nat-gateway-us-east-2a',
      TagSpecifications: nat.input(id).TagSpecifications,
    });
    const route = resource(steps, 'route-public', 'aws:route');
    assert.deepEqual(route.deps, ['route-table-public', 'internet-gateway-attachment']);
    assert.deepEqual(route.dependsOn, ['route-table-public', 'internet-gateway']);
    assert.deepEqual(route.input(id), {
      RouteTableId: '<route-table-public>',
      DestinationCidrBlock: '0.0.0.0/0',
      GatewayId: '<internet-gateway>',
    });
    assert.deepEqual(
      resource(steps, 'route-private-us-east-2a', 'aws:route').input(id).NatGatewayId,
      '<nat-gateway-us-east-2a>',
    );
  });

  it('checks the image before any launch template, which carries the SEV-SNP CPU option, role profile and state disk', function () {
    const steps = byId(planCreate(createRequest()).steps);
    const template = resource(steps, 'launch-template-control_plane_default', 'aws:launch-template');
    assert.deepEqual(template.deps, ['security-group', 'image']);
    assert.deepEqual(template.dependsOn, ['security-group']);
    const data = template.input(id).LaunchTemplateData!;
    assert.deepEqual(data.CpuOptions, { AmdSevSnp: 'enabled' });
    assert.deepEqual(data.IamInstanceProfile, { Name: 'demo-control-plane-profile' });
    assert.deepEqual(data.SecurityGroupIds, ['<security-group>']);
    assert.deepEqual(data.BlockDeviceMappings?.[0]?.Ebs, {
      VolumeSize: 30,
      VolumeType: 'gp3',
      DeleteOnTermination: true,
      Encrypted: true,
    });
    assert.deepEqual(steps.get('image'), {
      id: 'image',
      deps: [],
      kind: 'check-image',
      imageId: createRequest().image,
    });

    const nitro = byId(planCreate(createRequest({ attestationVariant: 'aws-nitro-tpm' })).steps);
    assert.equal(
      resource(nitro, 'launch-template-worker_default', 'aws:launch-template').input(id).LaunchTemplateData!.CpuOptions,
      undefined,
    );
  });

  it('gives every zone of the node groups subnets and a NAT gateway; the load balancer lives in the config zone', function () {
    const request = createRequest();
    request.nodeGroups[1]!.zone = 'us-east-2b';
    const plan = planCreate(request);
    assert.deepEqual(plan.zones, ['us-east-2a', 'us-east-2b']);
    const steps = byId(plan.steps);
    const cidrs = ['private', 'public'].flatMap((tier) =>
      plan.zones.map((z) => resource(steps, `subnet-${tier}-${z}`, 'aws:subnet').input(id).CidrBlock),
    );
    assert.deepEqual(cidrs, ['192.168.0.0/20', '192.168.16.0/20', '192.168.128.0/20', '192.168.144.0/20']);
    assert.equal(
      resource(steps, 'nat-gateway-us-east-2b', 'aws:nat-gateway').input(id).AllocationId,
      '<elastic-ip-nat-us-east-2b>',
    );
    // One elastic IP per zone and one for the load balancer: three zones stay within AWS's default quota of five.
    assert.deepEqual(
      plan.steps.filter((s) => s.kind === 'aws:elastic-ip').map((s) => s.id),
      ['elastic-ip-nat-us-east-2a', 'elastic-ip-nat-us-east-2b', 'elastic-ip-lb'],
    );
    const lb = resource(steps, 'load-balancer', 'aws:load-balancer');
    assert.deepEqual(lb.input(id).SubnetMappings, [
      { SubnetId: '<subnet-public-us-east-2a>', AllocationId: '<elastic-ip-lb>' },
    ]);
    assert.deepEqual(lb.deps, [
      'security-group',
      'internet-gateway-attachment',
      'subnet-public-us-east-2a',
      'elastic-ip-lb',
    ]);
    // Cross-zone load balancing, so the one address reaches control planes in every zone.
    const crossZone = steps.get('load-balancer-cross-zone');
    assert.ok(crossZone?.kind === 'load-balancer-attributes');
    assert.deepEqual(crossZone.deps, ['load-balancer']);
    assert.deepEqual(crossZone.input(id).Attributes, [{ Key: 'load_balancing.cross_zone.enabled', Value: 'true' }]);
    assert.equal(
      resource(steps, 'autoscaling-group-worker_default', 'aws:autoscaling-group').input(id).VPCZoneIdentifier,
      '<subnet-private-us-east-2b>',
    );
  });

  it('waits for each auto scaling group to run its desired capacity', function () {
    const steps = byId(planCreate(createRequest()).steps);
    const capacity = steps.get('capacity-worker_default');
    assert.ok(capacity?.kind === 'wait-capacity');
    assert.deepEqual(capacity.deps, ['autoscaling-group-worker_default']);
    assert.deepEqual(capacity.target(id), {
      groupName: '<autoscaling-group-worker_default>',
      nodeGroup: 'worker_default',
      desired: 2,
      instanceType: 'm6a.xlarge',
      zone: 'us-east-2a',
    });
  });

  it('opens the ports of docs/design.md#ports and the NodePort range from anywhere, everything within the VPC', function () {
    const rules = byId(planCreate(createRequest()).steps).get('security-group-rules');
    assert.ok(rules?.kind === 'security-group-rules');
    const permissions = rules.input(id).IpPermissions!;
    assert.deepEqual(
      permissions.map((p) => [p.IpProtocol, p.FromPort, p.ToPort, p.IpRanges?.[0]?.CidrIp]),
      [
        ['-1', undefined, undefined, '192.168.0.0/16'],
        ...[6443, 9000, 30090, 30081, 9999].map((port) => ['tcp', port, port, '0.0.0.0/0']),
        ['tcp', 30000, 32767, '0.0.0.0/0'],
      ],
    );
  });
  it("enables the load balancer in every zone that holds a control-plane group (only the config zone's address is an elastic IP)", function () {
    const request = createRequest();
    request.nodeGroups[0]!.zone = 'us-east-2b';
    const steps = byId(planCreate(request).steps);
    const lb = resource(steps, 'load-balancer', 'aws:load-balancer');
    assert.deepEqual(lb.input(id).SubnetMappings, [
      { SubnetId: '<subnet-public-us-east-2a>', AllocationId: '<elastic-ip-lb>' },
      { SubnetId: '<subnet-public-us-east-2b>' },
    ]);
    assert.ok(lb.deps.includes('subnet-public-us-east-2b'));
  });

  it('sets every target group as upstream: no client IP preservation, and a 30 s deregistration delay for draining', function () {
    const steps = byId(planCreate(createRequest()).steps);
    for (const port of [6443, 9000, 30090, 30081, 9999]) {
      const step = steps.get(`target-group-attributes-${port}`);
      assert.ok(step?.kind === 'target-group-attributes', String(port));
      assert.deepEqual(step.deps, [`target-group-${port}`]);
      assert.deepEqual(step.input(id), {
        TargetGroupArn: `<target-group-${port}>`,
        Attributes: [
          { Key: 'preserve_client_ip.enabled', Value: 'false' },
          { Key: 'deregistration_delay.timeout_seconds', Value: '30' },
        ],
      });
    }
  });

  it('gives an io2 state disk its Iops (EC2 refuses the launch without), and gp3 none', function () {
    const request = createRequest();
    request.nodeGroups[1]!.stateDiskType = 'io2';
    const steps = byId(planCreate(request).steps);
    const ebs = (group: string) =>
      resource(steps, `launch-template-${group}`, 'aws:launch-template').input(id).LaunchTemplateData!
        .BlockDeviceMappings![0]!.Ebs!;
    assert.deepEqual([ebs('worker_default').VolumeType, ebs('worker_default').Iops], ['io2', 3000]);
    assert.equal(ebs('control_plane_default').Iops, undefined);
  });

  const refusals: { name: string; request: () => ReturnType<typeof createRequest>; message: RegExp }[] = [
    {
      name: 'a node group zone outside the region',
      request: () => {
        const r = createRequest();
        r.nodeGroups[1]!.zone = 'eu-west-1a';
        return r;
      },
      message: /Zone "eu-west-1a" of a node group is not in provider\.aws\.region "us-east-2"/,
    },
    {
      name: 'an instance type without SEV-SNP',
      request: () => {
        const r = createRequest();
        r.nodeGroups[1]!.instanceType = 'm5.xlarge';
        return r;
      },
      message: /nodeGroups\.worker_default\.instanceType "m5\.xlarge" cannot run aws-sev-snp/,
    },
    {
      name: 'SEV-SNP in a region without it',
      request: () => {
        const r = createRequest({
          providerConfig: { ...createRequest().providerConfig, region: 'us-west-2', zone: 'us-west-2a' },
        });
        for (const g of r.nodeGroups) g.zone = 'us-west-2a';
        return r;
      },
      message:
        /AWS offers SEV-SNP instances \(attestation variant aws-sev-snp\) only in us-east-2 and eu-west-1, not in us-west-2/,
    },
    {
      name: 'a variant of another cloud',
      request: () => createRequest({ attestationVariant: 'gcp-sev-snp' }),
      message: /"gcp-sev-snp" does not run on AWS/,
    },
    {
      name: 'a missing instance profile',
      request: () => createRequest({ providerConfig: { region: 'us-east-2', zone: 'us-east-2a' } }),
      message: /provider\.aws\.iamProfileControlPlane is not set/,
    },
  ];
  for (const r of refusals) {
    it(`refuses ${r.name}`, function () {
      assert.throws(
        () => planCreate(r.request()),
        (err: Error) => err instanceof UserError && r.message.test(err.message),
      );
    });
  }
});
