/**
 * `create` on AWS, as upstream's Terraform (terraform/infrastructure/aws): the network (VPC, public and private
 * subnet per zone, internet gateway, NAT gateway with its elastic IP per zone, route tables), the security
 * group with the ports of DESIGN §9 and the NodePort range, a network load balancer in the config's zone with
 * one elastic IP (the cluster endpoint) and cross-zone load balancing on (so the endpoint reaches control-plane
 * nodes in every zone), one target group (with health check) and listener per port, and per node group a
 * launch template (confidential settings, state disk, instance profile) with an auto scaling group, which
 * create waits for until it runs its desired capacity (./capacity.ts). Elastic IPs: one per zone and one for
 * the load balancer, so three zones stay within AWS's default quota of five.
 *
 * The work is a graph of steps (see planSteps): independent steps run concurrently, each step's dependencies
 * are explicit. Every resource is written to the journal as soon as AWS accepted it (before waiting for it to
 * become available), so a re-run after an interruption skips what exists and continues; a failed run throws
 * CreateFailedError, after which `terminate` rolls back exactly what was recorded.
 */
import { CreateAutoScalingGroupCommand } from '@aws-sdk/client-auto-scaling';
import {
  AllocateAddressCommand,
  AssociateRouteTableCommand,
  AttachInternetGatewayCommand,
  AuthorizeSecurityGroupIngressCommand,
  CreateInternetGatewayCommand,
  CreateLaunchTemplateCommand,
  CreateNatGatewayCommand,
  CreateRouteCommand,
  CreateRouteTableCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeImagesCommand,
  DescribeLaunchTemplatesCommand,
  DescribeNatGatewaysCommand,
  DescribeRouteTablesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  waitUntilNatGatewayAvailable,
  type AllocateAddressCommandOutput,
  type AssociateRouteTableCommandOutput,
  type CreateInternetGatewayCommandOutput,
  type CreateLaunchTemplateCommandOutput,
  type CreateNatGatewayCommandOutput,
  type CreateRouteTableCommandOutput,
  type CreateSecurityGroupCommandOutput,
  type CreateSubnetCommandOutput,
  type CreateVpcCommandOutput,
  type DescribeImagesCommandOutput,
  type DescribeLaunchTemplatesCommandOutput,
  type DescribeNatGatewaysCommandOutput,
  type DescribeRouteTablesCommandOutput,
  type DescribeSecurityGroupsCommandOutput,
  type DescribeSubnetsCommandOutput,
  type ResourceType,
  type VolumeType,
  type _InstanceType,
} from '@aws-sdk/client-ec2';
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  ModifyLoadBalancerAttributesCommand,
  waitUntilLoadBalancerAvailable,
  type CreateListenerCommandOutput,
  type CreateLoadBalancerCommandOutput,
  type CreateTargetGroupCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, CreateResult, NodeGroupSpec, ProviderContext, RecordedResource } from '../contract.js';
import type { AwsClients } from './clients.js';
import { waitForCapacity } from './capacity.js';
import { checkImage, confidentialSettings } from './confidential.js';
import { awsErrorCode, CreateFailedError, isDuplicate, toUserError } from './errors.js';
import type { AwsProviderOptions } from './options.js';
import {
  KIND,
  LOAD_BALANCER_PORTS,
  NODE_PORT_RANGE,
  VPC_CIDR,
  awsName,
  clusterTags,
  isInfrastructureResource,
  nodeTags,
  recordData,
  subnetCidr,
  TAG,
  toTagList,
} from './resources.js';
import { runTaskGraph, TaskGraphError, type Task } from '../common/task-graph.js';

/** The config's provider.aws section, as far as create needs it. */
export interface AwsConfig {
  region: string;
  zone: string;
  iamProfileControlPlane: string;
  iamProfileWorkerNodes: string;
}

export function readAwsConfig(providerConfig: Record<string, unknown>): AwsConfig {
  const get = (key: keyof AwsConfig, hint: string): string => {
    const value = providerConfig[key];
    if (typeof value !== 'string' || value === '') {
      throw new UserError(`provider.aws.${key} is not set in the config.`, { hint });
    }
    return value;
  };
  const iamHint = 'Run `constellation iam create aws --update-config` to create the instance profiles and set them.';
  const config = {
    region: get('region', 'Set it to the AWS region to create the cluster in, e.g. us-east-2.'),
    zone: get('zone', 'Set it to an availability zone of the region, e.g. us-east-2a.'),
    iamProfileControlPlane: get('iamProfileControlPlane', iamHint),
    iamProfileWorkerNodes: get('iamProfileWorkerNodes', iamHint),
  };
  if (!config.zone.startsWith(config.region)) {
    throw new UserError(`provider.aws.zone "${config.zone}" is not in provider.aws.region "${config.region}".`, {
      hint: `Use a zone of ${config.region}, e.g. ${config.region}a.`,
    });
  }
  return config;
}

interface Made {
  id: string;
  data?: Record<string, unknown>;
}

export class AwsCreate {
  private readonly made = new Map<string, RecordedResource>();
  private readonly config: AwsConfig;
  /** Zones of the cluster: the config's zone first, then the node groups' other zones. */
  private readonly zones: string[];

  constructor(
    private readonly request: CreateRequest,
    private readonly ctx: ProviderContext,
    private readonly clients: AwsClients,
    private readonly options: AwsProviderOptions,
  ) {
    this.config = readAwsConfig(request.providerConfig);
    this.zones = [...new Set([this.config.zone, ...request.nodeGroups.map((g) => this.groupZone(g))])];
    for (const z of this.zones) {
      if (!z.startsWith(this.config.region)) {
        throw new UserError(`Zone "${z}" of a node group is not in provider.aws.region "${this.config.region}".`, {
          hint: 'Set nodeGroups.<name>.zone to a zone of the region, or leave it empty to use provider.aws.zone.',
        });
      }
    }
    for (const g of request.nodeGroups) confidentialSettings(request.attestationVariant, g.instanceType, g.name);
  }

  async run(): Promise<CreateResult> {
    await this.loadJournal();
    await this.clients.checkCredentials(this.config.region);
    const steps = this.planSteps();
    this.options.onPlan?.(steps.map((s) => ({ id: s.id, deps: [...(s.deps ?? [])] })));
    try {
      await runTaskGraph(steps, {
        signal: this.ctx.signal,
        onTaskStart: (t) => this.ctx.log.debug('aws create step started', { step: t.id }),
        onTaskEnd: (t, err) => this.ctx.log.debug('aws create step ended', { step: t.id, ok: !err }),
      });
    } catch (err) {
      if (this.ctx.signal?.aborted) {
        throw new CreateFailedError(new UserError('it was interrupted before it finished.', { cause: err }));
      }
      if (err instanceof TaskGraphError) {
        const others = err.otherFailures.map((f) => toUserError(`step ${f.task}`, f.error).message);
        throw new CreateFailedError(toUserError(`step ${err.task}`, err.cause), others);
      }
      throw err;
    }
    return this.result();
  }

  /** Resources of an earlier, interrupted run of the same cluster are reused; another cluster's are refused. */
  private async loadJournal(): Promise<void> {
    for (const r of (await this.ctx.journal.list()).filter(isInfrastructureResource)) {
      const data = recordData(r);
      if (data.uid !== undefined && data.uid !== this.request.uid) {
        throw new UserError(`The workspace already holds AWS resources of another cluster (uid ${data.uid}).`, {
          hint: 'Run `constellation terminate` for that cluster first, or use a new workspace.',
        });
      }
      if (r.name) this.made.set(r.name, r);
    }
  }

  private groupZone(g: NodeGroupSpec): string {
    return g.zone || this.config.zone;
  }

  private id(name: string): string {
    const r = this.made.get(name);
    if (!r) throw new Error(`step order bug: ${name} is needed but was not made`);
    return r.id;
  }

  private data(name: string): Record<string, unknown> {
    return this.made.get(name)?.data ?? {};
  }

  /** Makes a resource unless the journal has it; records it the moment AWS accepted it. */
  private async ensure(name: string, kind: string, dependsOn: string[], create: () => Promise<Made>): Promise<string> {
    const existing = this.made.get(name);
    if (existing) return existing.id;
    this.ctx.progress?.(`creating ${name}`);
    const made = await create();
    const record: RecordedResource = {
      kind,
      id: made.id,
      name,
      dependsOn: dependsOn.map((d) => this.id(d)),
      data: { region: this.config.region, uid: this.request.uid, ...made.data },
    };
    await this.ctx.journal.record(record);
    this.made.set(name, record);
    return made.id;
  }

  private tagSpec(type: ResourceType, nameSuffix: string, extra: Record<string, string> = {}) {
    const tags = { ...clusterTags(this.request, awsName(this.request, nameSuffix, 255)), ...extra };
    return [{ ResourceType: type, Tags: toTagList(tags) }];
  }

  private get ec2() {
    return this.clients.ec2(this.config.region);
  }

  private get elb() {
    return this.clients.elb(this.config.region);
  }

  private send<T>(client: Parameters<AwsClients['send']>[0], command: unknown, action: string): Promise<T> {
    return this.clients.send<T>(client, command, action);
  }

  /** The dependency graph of create. Step ids equal the journal names of the resources they make. */
  planSteps(): Task[] {
    const steps: Task[] = [];
    const step = (id: string, deps: string[], run: () => Promise<unknown>) => steps.push({ id, deps, run: async () => void (await run()) });

    step('image', [], () => this.checkImage());
    step('vpc', [], () =>
      this.ensure('vpc', KIND.vpc, [], async () => {
        const out = await this.send<CreateVpcCommandOutput>(
          this.ec2,
          new CreateVpcCommand({ CidrBlock: VPC_CIDR, TagSpecifications: this.tagSpec('vpc', 'vpc') }),
          'Creating the VPC',
        );
        return { id: out.Vpc!.VpcId! };
      }),
    );
    step('internet-gateway', [], () =>
      this.ensure('internet-gateway', KIND.internetGateway, [], async () => {
        const out = await this.send<CreateInternetGatewayCommandOutput>(
          this.ec2,
          new CreateInternetGatewayCommand({ TagSpecifications: this.tagSpec('internet-gateway', 'igw') }),
          'Creating the internet gateway',
        );
        return { id: out.InternetGateway!.InternetGatewayId! };
      }),
    );
    step('internet-gateway-attachment', ['vpc', 'internet-gateway'], () => this.attachInternetGateway());

    step('route-table-public', ['vpc'], () => this.routeTable('route-table-public', 'public'));
    step('route-public', ['route-table-public', 'internet-gateway-attachment'], () =>
      this.route('route-public', 'route-table-public', { GatewayId: this.id('internet-gateway') }, ['internet-gateway']),
    );

    this.zones.forEach((zone, index) => {
      for (const tier of ['private', 'public'] as const) {
        step(`subnet-${tier}-${zone}`, ['vpc'], () =>
          this.ensure(`subnet-${tier}-${zone}`, KIND.subnet, ['vpc'], async () => ({
            id: await this.subnet(subnetCidr(tier, index), zone, `${tier}-${zone}`),
            data: { zone, tier },
          })),
        );
      }
      step(`elastic-ip-nat-${zone}`, [], () => this.elasticIp(`elastic-ip-nat-${zone}`, `nat-${zone}`));
      step(`association-public-${zone}`, ['route-table-public', `subnet-public-${zone}`], () =>
        this.associate(`association-public-${zone}`, 'route-table-public', `subnet-public-${zone}`),
      );
      // A public NAT gateway needs the VPC's internet gateway (and must be gone before it can be detached).
      step(`nat-gateway-${zone}`, [`subnet-public-${zone}`, `elastic-ip-nat-${zone}`, 'internet-gateway-attachment'], () => this.natGateway(zone));
      step(`route-table-private-${zone}`, ['vpc'], () => this.routeTable(`route-table-private-${zone}`, `private-${zone}`));
      step(`route-private-${zone}`, [`route-table-private-${zone}`, `nat-gateway-${zone}`], () =>
        this.route(`route-private-${zone}`, `route-table-private-${zone}`, { NatGatewayId: this.id(`nat-gateway-${zone}`) }, [
          `nat-gateway-${zone}`,
        ]),
      );
      step(`association-private-${zone}`, [`route-table-private-${zone}`, `subnet-private-${zone}`], () =>
        this.associate(`association-private-${zone}`, `route-table-private-${zone}`, `subnet-private-${zone}`),
      );
    });

    step('security-group', ['vpc'], () => this.securityGroup());
    step('security-group-rules', ['security-group'], () => this.securityGroupRules());

    // As upstream: the load balancer lives in the config's zone with one elastic IP, the cluster endpoint.
    const primary = this.config.zone;
    step('elastic-ip-lb', [], () => this.elasticIp('elastic-ip-lb', `lb-${primary}`));
    const lbDeps = ['security-group', 'internet-gateway-attachment', `subnet-public-${primary}`, 'elastic-ip-lb'];
    step('load-balancer', lbDeps, () => this.loadBalancer(lbDeps));
    // Cross-zone load balancing: the one zone's address must reach control-plane nodes in every zone.
    step('load-balancer-cross-zone', ['load-balancer'], () => this.crossZone());
    step('load-balancer-active', ['load-balancer'], () =>
      this.clients.wait(waitUntilLoadBalancerAvailable, this.elb, { LoadBalancerArns: [this.id('load-balancer')] }, 'Waiting for the load balancer'),
    );
    for (const p of LOAD_BALANCER_PORTS) {
      step(`target-group-${p.port}`, ['vpc'], () => this.targetGroup(p));
      step(`listener-${p.port}`, ['load-balancer', `target-group-${p.port}`], () => this.listener(p.port));
    }

    for (const g of this.request.nodeGroups) {
      step(`launch-template-${g.name}`, ['security-group', 'image'], () => this.launchTemplate(g));
      const zone = this.groupZone(g);
      // Nodes need their NAT route at boot (images, time); control-plane nodes join the target groups.
      const deps = [`launch-template-${g.name}`, `subnet-private-${zone}`, `route-private-${zone}`, `association-private-${zone}`];
      if (g.role === 'control-plane') deps.push(...LOAD_BALANCER_PORTS.map((p) => `target-group-${p.port}`));
      step(`autoscaling-group-${g.name}`, deps, () => this.autoScalingGroup(g, deps));
      step(`capacity-${g.name}`, [`autoscaling-group-${g.name}`], () =>
        waitForCapacity(
          this.clients,
          this.config.region,
          { groupName: this.id(`autoscaling-group-${g.name}`), nodeGroup: g.name, desired: g.initialCount, instanceType: g.instanceType, zone },
          this.ctx,
          this.options,
        ),
      );
    }
    return steps;
  }

  private async checkImage(): Promise<void> {
    let images: DescribeImagesCommandOutput['Images'];
    try {
      const out = await this.send<DescribeImagesCommandOutput>(this.ec2, new DescribeImagesCommand({ ImageIds: [this.request.image] }), 'Looking up the image');
      images = out.Images;
    } catch (err) {
      if (!/^InvalidAMIID\./.test(awsErrorCode(err))) throw err;
    }
    checkImage(this.request.image, images?.[0]);
  }

  private async subnet(cidr: string, zone: string, suffix: string): Promise<string> {
    const vpcId = this.id('vpc');
    try {
      const out = await this.send<CreateSubnetCommandOutput>(
        this.ec2,
        new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: cidr, AvailabilityZone: zone, TagSpecifications: this.tagSpec('subnet', suffix) }),
        `Creating the ${suffix} subnet`,
      );
      return out.Subnet!.SubnetId!;
    } catch (err) {
      // Created by the interrupted run, before it could record it: adopt it if it carries our uid.
      if (awsErrorCode(err) !== 'InvalidSubnet.Conflict') throw err;
      const out = await this.send<DescribeSubnetsCommandOutput>(
        this.ec2,
        new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpcId] }, { Name: 'cidr-block', Values: [cidr] }, { Name: `tag:${TAG.uid}`, Values: [this.request.uid] }] }),
        'Describing the subnets',
      );
      const id = out.Subnets?.[0]?.SubnetId;
      if (!id) throw err;
      return id;
    }
  }

  private async attachInternetGateway(): Promise<void> {
    const [igw, vpc] = [this.id('internet-gateway'), this.id('vpc')];
    await this.ensure('internet-gateway-attachment', KIND.internetGatewayAttachment, ['internet-gateway', 'vpc'], async () => {
      try {
        await this.send(this.ec2, new AttachInternetGatewayCommand({ InternetGatewayId: igw, VpcId: vpc }), 'Attaching the internet gateway');
      } catch (err) {
        // Attached by the interrupted run, before it could record it.
        if (awsErrorCode(err) !== 'Resource.AlreadyAssociated') throw err;
      }
      return { id: `${igw}|${vpc}`, data: { internetGatewayId: igw, vpcId: vpc } };
    });
  }

  private elasticIp(name: string, suffix: string): Promise<string> {
    return this.ensure(name, KIND.elasticIp, [], async () => {
      const out = await this.send<AllocateAddressCommandOutput>(
        this.ec2,
        new AllocateAddressCommand({ Domain: 'vpc', TagSpecifications: this.tagSpec('elastic-ip', suffix) }),
        'Allocating an elastic IP address',
      );
      return { id: out.AllocationId!, data: { publicIp: out.PublicIp } };
    });
  }

  private async natGateway(zone: string): Promise<void> {
    const name = `nat-gateway-${zone}`;
    const id = await this.ensure(name, KIND.natGateway, [`subnet-public-${zone}`, `elastic-ip-nat-${zone}`, 'internet-gateway-attachment'], async () => {
      const out = await this.send<CreateNatGatewayCommandOutput>(
        this.ec2,
        new CreateNatGatewayCommand({
          SubnetId: this.id(`subnet-public-${zone}`),
          AllocationId: this.id(`elastic-ip-nat-${zone}`),
          ConnectivityType: 'public',
          // Same token on a re-run: AWS returns the gateway the interrupted run asked for.
          ClientToken: `${this.request.uid}-${name}`.slice(0, 64),
          TagSpecifications: this.tagSpec('natgateway', `nat-${zone}`),
        }),
        `Creating the NAT gateway in ${zone}`,
      );
      return { id: out.NatGateway!.NatGatewayId! };
    });
    try {
      await this.clients.wait(waitUntilNatGatewayAvailable, this.ec2, { NatGatewayIds: [id] }, `Waiting for the NAT gateway ${id}`);
    } catch (err) {
      const out = await this.send<DescribeNatGatewaysCommandOutput>(this.ec2, new DescribeNatGatewaysCommand({ NatGatewayIds: [id] }), 'Describing the NAT gateway');
      const gw = out.NatGateways?.[0];
      if (gw?.State === 'failed') {
        throw new UserError(`The NAT gateway ${id} in ${zone} failed: ${gw.FailureCode ?? ''} ${gw.FailureMessage ?? ''}`.trim(), { cause: err });
      }
      throw err;
    }
  }

  private routeTable(name: string, suffix: string): Promise<string> {
    return this.ensure(name, KIND.routeTable, ['vpc'], async () => {
      const out = await this.send<CreateRouteTableCommandOutput>(
        this.ec2,
        new CreateRouteTableCommand({ VpcId: this.id('vpc'), TagSpecifications: this.tagSpec('route-table', suffix) }),
        `Creating the ${suffix} route table`,
      );
      return { id: out.RouteTable!.RouteTableId! };
    });
  }

  private route(name: string, table: string, target: { GatewayId?: string; NatGatewayId?: string }, targetDeps: string[]): Promise<string> {
    const tableId = this.id(table);
    return this.ensure(name, KIND.route, [table, ...targetDeps], async () => {
      try {
        await this.send(this.ec2, new CreateRouteCommand({ RouteTableId: tableId, DestinationCidrBlock: '0.0.0.0/0', ...target }), `Creating the default route of ${table}`);
      } catch (err) {
        if (awsErrorCode(err) !== 'RouteAlreadyExists') throw err;
      }
      return { id: `${tableId}|0.0.0.0/0`, data: { routeTableId: tableId, destination: '0.0.0.0/0' } };
    });
  }

  private associate(name: string, table: string, subnet: string): Promise<string> {
    const [tableId, subnetId] = [this.id(table), this.id(subnet)];
    return this.ensure(name, KIND.routeTableAssociation, [table, subnet], async () => {
      try {
        const out = await this.send<AssociateRouteTableCommandOutput>(
          this.ec2,
          new AssociateRouteTableCommand({ RouteTableId: tableId, SubnetId: subnetId }),
          `Associating ${table} with ${subnet}`,
        );
        return { id: out.AssociationId! };
      } catch (err) {
        if (awsErrorCode(err) !== 'Resource.AlreadyAssociated') throw err;
        const out = await this.send<DescribeRouteTablesCommandOutput>(this.ec2, new DescribeRouteTablesCommand({ RouteTableIds: [tableId] }), 'Describing a route table');
        const assoc = out.RouteTables?.[0]?.Associations?.find((a) => a.SubnetId === subnetId);
        if (!assoc?.RouteTableAssociationId) throw err;
        return { id: assoc.RouteTableAssociationId };
      }
    });
  }

  private securityGroup(): Promise<string> {
    const groupName = awsName(this.request, 'nodes', 255);
    return this.ensure('security-group', KIND.securityGroup, ['vpc'], async () => {
      try {
        const out = await this.send<CreateSecurityGroupCommandOutput>(
          this.ec2,
          new CreateSecurityGroupCommand({
            GroupName: groupName,
            Description: `Constellation cluster ${this.request.name} (${this.request.uid}) nodes and load balancer`,
            VpcId: this.id('vpc'),
            TagSpecifications: this.tagSpec('security-group', 'nodes'),
          }),
          'Creating the security group',
        );
        return { id: out.GroupId! };
      } catch (err) {
        if (!isDuplicate(err)) throw err;
        const out = await this.send<DescribeSecurityGroupsCommandOutput>(
          this.ec2,
          new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'vpc-id', Values: [this.id('vpc')] }, { Name: 'group-name', Values: [groupName] }] }),
          'Describing the security group',
        );
        const id = out.SecurityGroups?.[0]?.GroupId;
        if (!id) throw err;
        return { id };
      }
    });
  }

  /** Cluster-internal traffic within the VPC; the load balancer's ports from anywhere (an NLB keeps client IPs). */
  private async securityGroupRules(): Promise<void> {
    try {
      await this.send(
        this.ec2,
        new AuthorizeSecurityGroupIngressCommand({
          GroupId: this.id('security-group'),
          IpPermissions: [
            { IpProtocol: '-1', IpRanges: [{ CidrIp: VPC_CIDR, Description: 'cluster-internal traffic' }] },
            ...LOAD_BALANCER_PORTS.map((p) => ({
              IpProtocol: 'tcp',
              FromPort: p.port,
              ToPort: p.port,
              IpRanges: [{ CidrIp: '0.0.0.0/0', Description: p.name }],
            })),
            // Kubernetes' NodePort services, open as upstream opens them.
            { IpProtocol: 'tcp', FromPort: NODE_PORT_RANGE.from, ToPort: NODE_PORT_RANGE.to, IpRanges: [{ CidrIp: '0.0.0.0/0', Description: 'K8s node ports' }] },
          ],
        }),
        'Opening the ports in the security group',
      );
    } catch (err) {
      if (awsErrorCode(err) !== 'InvalidPermission.Duplicate') throw err;
    }
  }

  private loadBalancer(deps: string[]): Promise<string> {
    return this.ensure('load-balancer', KIND.loadBalancer, deps, async () => {
      // Same name and settings on a re-run: AWS returns the existing load balancer.
      const out = await this.send<CreateLoadBalancerCommandOutput>(
        this.elb,
        new CreateLoadBalancerCommand({
          Name: awsName(this.request, 'lb', 32),
          Type: 'network',
          Scheme: 'internet-facing',
          IpAddressType: 'ipv4',
          SubnetMappings: [{ SubnetId: this.id(`subnet-public-${this.config.zone}`), AllocationId: this.id('elastic-ip-lb') }],
          SecurityGroups: [this.id('security-group')],
          Tags: toTagList(clusterTags(this.request, awsName(this.request, 'lb', 255))),
        }),
        'Creating the load balancer',
      );
      const lb = out.LoadBalancers![0];
      return { id: lb.LoadBalancerArn!, data: { dnsName: lb.DNSName } };
    });
  }

  /** Turns cross-zone load balancing on (network load balancers have it off); setting it again changes nothing. */
  private async crossZone(): Promise<void> {
    await this.send(
      this.elb,
      new ModifyLoadBalancerAttributesCommand({
        LoadBalancerArn: this.id('load-balancer'),
        Attributes: [{ Key: 'load_balancing.cross_zone.enabled', Value: 'true' }],
      }),
      'Turning on cross-zone load balancing',
    );
  }

  private targetGroup(p: (typeof LOAD_BALANCER_PORTS)[number]): Promise<string> {
    return this.ensure(`target-group-${p.port}`, KIND.targetGroup, ['vpc'], async () => {
      const out = await this.send<CreateTargetGroupCommandOutput>(
        this.elb,
        new CreateTargetGroupCommand({
          Name: awsName(this.request, String(p.port), 32),
          Protocol: 'TCP',
          Port: p.port,
          VpcId: this.id('vpc'),
          TargetType: 'instance',
          HealthCheckEnabled: true,
          HealthCheckProtocol: p.healthCheck.protocol,
          HealthCheckPort: 'traffic-port',
          HealthCheckPath: p.healthCheck.path,
          HealthCheckIntervalSeconds: 10,
          HealthyThresholdCount: 2,
          UnhealthyThresholdCount: 2,
          Tags: toTagList(clusterTags(this.request, awsName(this.request, p.name, 255))),
        }),
        `Creating the target group for port ${p.port}`,
      );
      return { id: out.TargetGroups![0].TargetGroupArn!, data: { port: p.port } };
    });
  }

  private listener(port: number): Promise<string> {
    return this.ensure(`listener-${port}`, KIND.listener, ['load-balancer', `target-group-${port}`], async () => {
      const out = await this.send<CreateListenerCommandOutput>(
        this.elb,
        new CreateListenerCommand({
          LoadBalancerArn: this.id('load-balancer'),
          Protocol: 'TCP',
          Port: port,
          DefaultActions: [{ Type: 'forward', TargetGroupArn: this.id(`target-group-${port}`) }],
        }),
        `Creating the listener for port ${port}`,
      );
      return { id: out.Listeners![0].ListenerArn!, data: { port } };
    });
  }

  private launchTemplate(g: NodeGroupSpec): Promise<string> {
    const name = awsName(this.request, g.name, 125);
    const tags = toTagList({ ...clusterTags(this.request, name), ...nodeTags(this.request, g.name, g.role) });
    return this.ensure(`launch-template-${g.name}`, KIND.launchTemplate, ['security-group'], async () => {
      try {
        const out = await this.send<CreateLaunchTemplateCommandOutput>(
          this.ec2,
          new CreateLaunchTemplateCommand({
            LaunchTemplateName: name,
            ClientToken: `${this.request.uid}-lt-${g.name}`.slice(0, 64),
            LaunchTemplateData: {
              ImageId: this.request.image,
              InstanceType: g.instanceType as _InstanceType,
              IamInstanceProfile: { Name: g.role === 'control-plane' ? this.config.iamProfileControlPlane : this.config.iamProfileWorkerNodes },
              SecurityGroupIds: [this.id('security-group')],
              MetadataOptions: { HttpEndpoint: 'enabled', HttpTokens: 'required', HttpPutResponseHopLimit: 2 },
              BlockDeviceMappings: [
                {
                  // The state disk; the node encrypts it with the key the join service derives (DESIGN §4).
                  DeviceName: '/dev/sdb',
                  Ebs: { VolumeSize: g.stateDiskSizeGB, VolumeType: g.stateDiskType as VolumeType, DeleteOnTermination: true, Encrypted: true },
                },
              ],
              ...confidentialSettings(this.request.attestationVariant, g.instanceType, g.name),
              TagSpecifications: [
                { ResourceType: 'instance', Tags: tags },
                { ResourceType: 'volume', Tags: tags },
              ],
            },
            TagSpecifications: [{ ResourceType: 'launch-template', Tags: tags }],
          }),
          `Creating the launch template of node group ${g.name}`,
        );
        return { id: out.LaunchTemplate!.LaunchTemplateId!, data: { nodeGroup: g.name } };
      } catch (err) {
        if (!isDuplicate(err)) throw err;
        const out = await this.send<DescribeLaunchTemplatesCommandOutput>(
          this.ec2,
          new DescribeLaunchTemplatesCommand({ LaunchTemplateNames: [name] }),
          'Describing the launch template',
        );
        const id = out.LaunchTemplates?.[0]?.LaunchTemplateId;
        if (!id) throw err;
        return { id, data: { nodeGroup: g.name } };
      }
    });
  }

  private autoScalingGroup(g: NodeGroupSpec, deps: string[]): Promise<string> {
    const name = awsName(this.request, g.name, 255);
    const tags = { ...clusterTags(this.request, name), ...nodeTags(this.request, g.name, g.role) };
    return this.ensure(`autoscaling-group-${g.name}`, KIND.autoScalingGroup, deps, async () => {
      try {
        await this.send(
          this.clients.autoscaling(this.config.region),
          new CreateAutoScalingGroupCommand({
            AutoScalingGroupName: name,
            LaunchTemplate: { LaunchTemplateId: this.id(`launch-template-${g.name}`), Version: '$Latest' },
            MinSize: 0,
            MaxSize: Math.max(10, g.initialCount),
            DesiredCapacity: g.initialCount,
            VPCZoneIdentifier: this.id(`subnet-private-${this.groupZone(g)}`),
            TargetGroupARNs: g.role === 'control-plane' ? LOAD_BALANCER_PORTS.map((p) => this.id(`target-group-${p.port}`)) : undefined,
            HealthCheckType: 'EC2',
            Tags: Object.entries(tags).map(([Key, Value]) => ({
              Key,
              Value,
              PropagateAtLaunch: true,
              ResourceId: name,
              ResourceType: 'auto-scaling-group',
            })),
          }),
          `Creating the auto scaling group of node group ${g.name}`,
        );
      } catch (err) {
        // Created by the interrupted run: the name carries the cluster's uid, so it is ours.
        if (!isDuplicate(err)) throw err;
      }
      return { id: name, data: { nodeGroup: g.name, role: g.role, zone: this.groupZone(g) } };
    });
  }

  private result(): CreateResult {
    const publicIp = this.data('elastic-ip-lb').publicIp as string;
    const dnsName = this.data('load-balancer').dnsName as string;
    const groups = Object.fromEntries(this.request.nodeGroups.map((g) => [g.name, this.id(`autoscaling-group-${g.name}`)]));
    return {
      clusterEndpoint: publicIp,
      inClusterEndpoint: dnsName,
      apiServerCertSANs: [publicIp, dnsName],
      ipCidrNode: VPC_CIDR,
      providerState: {
        region: this.config.region,
        zone: this.config.zone,
        vpcId: this.id('vpc'),
        securityGroupId: this.id('security-group'),
        loadBalancerArn: this.id('load-balancer'),
        loadBalancerDnsName: dnsName,
        autoScalingGroups: groups,
      },
    };
  }
}
