/**
 * What `create` makes on AWS (as upstream's Terraform, terraform/infrastructure/aws), as data: every step with
 * its id (the journal name of what it makes), the steps it
 * waits for, the resources it depends on in the journal (terminate deletes it before them) and the request the
 * SDK sends, as a function of the ids AWS gave the resources made before it. Pure (no SDK call, no I/O; the SDK
 * is imported for its types only), so the order is explicit in one place, tests inspect it, and ./create.ts only
 * executes it.
 *
 *   vpc ─┬─ subnet-{private,public}-<zone> ─┬─ association-* ─────────────────────────┐
 *        ├─ route-table-public ─ route-public (after internet-gateway-attachment)     │
 *        ├─ route-table-private-<zone> ─ route-private-<zone> (after nat-gateway-<zone>)
 *        ├─ security-group ─┬─ security-group-rules                                   │
 *        │                  ├─ launch-template-<group> (after image) ─────────────────┼─ autoscaling-group-<group>
 *        └─ target-group-<port> ─ listener-<port> ─────────────────────────────────────┘  (control plane: target groups)
 *   internet-gateway ─ internet-gateway-attachment (vpc) ─ nat-gateway-<zone> (public subnet, elastic-ip-nat-<zone>)
 *   load-balancer (security group, the config zone's public subnet, elastic-ip-lb) ─┬─ load-balancer-cross-zone
 *                                                                                   ├─ load-balancer-active
 *                                                                                   └─ listener-<port>
 *   autoscaling-group-<group> ─ capacity-<group> (until it runs its desired capacity, ./capacity.ts)
 *
 * Zones: the config's zone first, then the node groups' other zones; each zone has a private subnet (nodes) and
 * a public one (NAT gateway), each node group lives in the private subnet of its zone. The network load balancer
 * is enabled in the config's zone, with one elastic IP (the cluster endpoint), and in every zone that holds a
 * control-plane group, with an address AWS assigns (no elastic IP): cross-zone load balancing does not reach a
 * zone the load balancer is not enabled in (its targets there stay `unused`, Target.NotInUse), so upstream's
 * single-zone load balancer would never send to control planes in another zone. Cross-zone load balancing is on,
 * so the endpoint's address reaches every enabled zone. Elastic IPs: one per zone (NAT) and one for the load
 * balancer, so four zones fit AWS's default quota of five; create checks the quota before it allocates any
 * (./create.ts). Target groups as upstream: client IPs not preserved, and a deregistration delay of 30 s so that
 * draining a control plane (upgrades, scale-in) does not take AWS's default 5 minutes. Open ports: those of the
 * load balancer and the NodePort range.
 */
import type { CreateAutoScalingGroupCommandInput } from '@aws-sdk/client-auto-scaling';
import type {
  AllocateAddressCommandInput,
  AssociateRouteTableCommandInput,
  AttachInternetGatewayCommandInput,
  AuthorizeSecurityGroupIngressCommandInput,
  CreateInternetGatewayCommandInput,
  CreateLaunchTemplateCommandInput,
  CreateNatGatewayCommandInput,
  CreateRouteCommandInput,
  CreateRouteTableCommandInput,
  CreateSecurityGroupCommandInput,
  CreateSubnetCommandInput,
  CreateVpcCommandInput,
  ResourceType,
  VolumeType,
  _InstanceType,
} from '@aws-sdk/client-ec2';
import type {
  CreateListenerCommandInput,
  CreateLoadBalancerCommandInput,
  CreateTargetGroupCommandInput,
  ModifyLoadBalancerAttributesCommandInput,
  ModifyTargetGroupAttributesCommandInput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, NodeGroupSpec } from '../contract.js';
import { checkRegion, confidentialSettings } from './confidential.js';
import type { CapacityTarget } from './capacity.js';
import {
  KIND,
  LOAD_BALANCER_PORTS,
  NODE_PORT_RANGE,
  VPC_CIDR,
  DEREGISTRATION_DELAY_SECONDS,
  awsName,
  clusterTags,
  nodeTags,
  subnetCidr,
  toTagList,
  type LoadBalancerPort,
} from './resources.js';

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

/** The id AWS gave the resource a step made, by step id. */
export type IdOf = (step: string) => string;

/** Step ids, shared by the plan and the executor's result. */
export const STEP = {
  vpc: 'vpc',
  internetGateway: 'internet-gateway',
  internetGatewayAttachment: 'internet-gateway-attachment',
  securityGroup: 'security-group',
  loadBalancer: 'load-balancer',
  loadBalancerIp: 'elastic-ip-lb',
  subnet: (tier: 'private' | 'public', zone: string) => `subnet-${tier}-${zone}`,
  natIp: (zone: string) => `elastic-ip-nat-${zone}`,
  natGateway: (zone: string) => `nat-gateway-${zone}`,
  targetGroup: (port: number) => `target-group-${port}`,
  launchTemplate: (group: string) => `launch-template-${group}`,
  autoScalingGroup: (group: string) => `autoscaling-group-${group}`,
} as const;

/** The request each kind of resource is made with. */
interface Inputs {
  [KIND.vpc]: CreateVpcCommandInput;
  [KIND.internetGateway]: CreateInternetGatewayCommandInput;
  [KIND.internetGatewayAttachment]: AttachInternetGatewayCommandInput;
  [KIND.subnet]: CreateSubnetCommandInput;
  [KIND.elasticIp]: AllocateAddressCommandInput;
  [KIND.natGateway]: CreateNatGatewayCommandInput;
  [KIND.routeTable]: CreateRouteTableCommandInput;
  [KIND.route]: CreateRouteCommandInput;
  [KIND.routeTableAssociation]: AssociateRouteTableCommandInput;
  [KIND.securityGroup]: CreateSecurityGroupCommandInput;
  [KIND.loadBalancer]: CreateLoadBalancerCommandInput;
  [KIND.targetGroup]: CreateTargetGroupCommandInput;
  [KIND.listener]: CreateListenerCommandInput;
  [KIND.launchTemplate]: CreateLaunchTemplateCommandInput;
  [KIND.autoScalingGroup]: CreateAutoScalingGroupCommandInput;
}

interface StepBase {
  /** Task id; for a resource also its name in the journal. */
  id: string;
  /** Steps that must finish first. */
  deps: string[];
}

/** A step that makes one resource and records it in the journal the moment AWS accepted it. */
export type ResourceStep = {
  [K in keyof Inputs]: StepBase & {
    kind: K;
    /** What the resource's journal record depends on (step ids): terminate deletes it before those. */
    dependsOn: string[];
    /** What the step does, for messages ("Creating the VPC"). */
    action: string;
    /** Kept in the journal record besides region and uid. */
    data?: Record<string, unknown>;
    input: (id: IdOf) => Inputs[K];
  };
}[keyof Inputs];

/** A step that makes nothing to record: a check, a wait, or settings of a resource made before. */
export type OtherStep = StepBase &
  (
    | { kind: 'check-image'; imageId: string }
    | { kind: 'wait-load-balancer'; loadBalancer: string }
    | { kind: 'security-group-rules'; action: string; input: (id: IdOf) => AuthorizeSecurityGroupIngressCommandInput }
    | {
        kind: 'load-balancer-attributes';
        action: string;
        input: (id: IdOf) => ModifyLoadBalancerAttributesCommandInput;
      }
    | { kind: 'target-group-attributes'; action: string; input: (id: IdOf) => ModifyTargetGroupAttributesCommandInput }
    | { kind: 'wait-capacity'; target: (id: IdOf) => CapacityTarget }
  );

export type AwsStep = ResourceStep | OtherStep;

export interface AwsPlan {
  config: AwsConfig;
  /** The config's zone first, then the node groups' other zones. */
  zones: string[];
  /** Elastic IPs the cluster holds: one per zone (NAT gateway) and one for the load balancer (steps elastic-ip-*). */
  elasticIpSteps: string[];
  steps: AwsStep[];
}

/** Builds the plan of a create request; a UserError (before any call to AWS) for a config AWS would refuse. */
export function planCreate(request: CreateRequest): AwsPlan {
  const config = readAwsConfig(request.providerConfig);
  const groupZone = (g: NodeGroupSpec) => g.zone || config.zone;
  const zones = [...new Set([config.zone, ...request.nodeGroups.map(groupZone)])];
  for (const z of zones) {
    if (!z.startsWith(config.region)) {
      throw new UserError(`Zone "${z}" of a node group is not in provider.aws.region "${config.region}".`, {
        hint: 'Set nodeGroups.<name>.zone to a zone of the region, or leave it empty to use provider.aws.zone.',
      });
    }
  }
  const cpu = new Map(
    request.nodeGroups.map((g) => [g.name, confidentialSettings(request.attestationVariant, g.instanceType, g.name)]),
  );
  checkRegion(request.attestationVariant, config.region);

  const tagSpec = (type: ResourceType, nameSuffix: string) => [
    { ResourceType: type, Tags: toTagList(clusterTags(request, awsName(request, nameSuffix, 255))) },
  ];
  const steps: AwsStep[] = [];
  const resource = (step: ResourceStep) => steps.push(step);
  const elasticIp = (stepId: string, suffix: string) =>
    resource({
      id: stepId,
      deps: [],
      dependsOn: [],
      kind: KIND.elasticIp,
      action: 'Allocating an elastic IP address',
      input: () => ({ Domain: 'vpc', TagSpecifications: tagSpec('elastic-ip', suffix) }),
    });

  steps.push({ id: 'image', deps: [], kind: 'check-image', imageId: request.image });
  resource({
    id: STEP.vpc,
    deps: [],
    dependsOn: [],
    kind: KIND.vpc,
    action: 'Creating the VPC',
    input: () => ({ CidrBlock: VPC_CIDR, TagSpecifications: tagSpec('vpc', 'vpc') }),
  });
  resource({
    id: STEP.internetGateway,
    deps: [],
    dependsOn: [],
    kind: KIND.internetGateway,
    action: 'Creating the internet gateway',
    input: () => ({ TagSpecifications: tagSpec('internet-gateway', 'igw') }),
  });
  resource({
    id: STEP.internetGatewayAttachment,
    deps: [STEP.vpc, STEP.internetGateway],
    dependsOn: [STEP.internetGateway, STEP.vpc],
    kind: KIND.internetGatewayAttachment,
    action: 'Attaching the internet gateway',
    input: (id) => ({ InternetGatewayId: id(STEP.internetGateway), VpcId: id(STEP.vpc) }),
  });

  const routeTable = (stepId: string, suffix: string) =>
    resource({
      id: stepId,
      deps: [STEP.vpc],
      dependsOn: [STEP.vpc],
      kind: KIND.routeTable,
      action: `Creating the ${suffix} route table`,
      input: (id) => ({ VpcId: id(STEP.vpc), TagSpecifications: tagSpec('route-table', suffix) }),
    });
  // The default route; its record depends on the gateway it points to, its step also on what makes that usable.
  const defaultRoute = (
    stepId: string,
    table: string,
    deps: string[],
    target: string,
    via: 'GatewayId' | 'NatGatewayId',
  ) =>
    resource({
      id: stepId,
      deps: [table, ...deps],
      dependsOn: [table, target],
      kind: KIND.route,
      action: `Creating the default route of ${table}`,
      input: (id) => ({ RouteTableId: id(table), DestinationCidrBlock: '0.0.0.0/0', [via]: id(target) }),
    });
  const associate = (stepId: string, table: string, subnet: string) =>
    resource({
      id: stepId,
      deps: [table, subnet],
      dependsOn: [table, subnet],
      kind: KIND.routeTableAssociation,
      action: `Associating ${table} with ${subnet}`,
      input: (id) => ({ RouteTableId: id(table), SubnetId: id(subnet) }),
    });

  routeTable('route-table-public', 'public');
  defaultRoute(
    'route-public',
    'route-table-public',
    [STEP.internetGatewayAttachment],
    STEP.internetGateway,
    'GatewayId',
  );

  zones.forEach((zone, index) => {
    for (const tier of ['private', 'public'] as const) {
      resource({
        id: STEP.subnet(tier, zone),
        deps: [STEP.vpc],
        dependsOn: [STEP.vpc],
        kind: KIND.subnet,
        action: `Creating the ${tier}-${zone} subnet`,
        data: { zone, tier },
        input: (id) => ({
          VpcId: id(STEP.vpc),
          CidrBlock: subnetCidr(tier, index),
          AvailabilityZone: zone,
          TagSpecifications: tagSpec('subnet', `${tier}-${zone}`),
        }),
      });
    }
    elasticIp(STEP.natIp(zone), `nat-${zone}`);
    associate(`association-public-${zone}`, 'route-table-public', STEP.subnet('public', zone));
    // A public NAT gateway needs the VPC's internet gateway (and must be gone before it can be detached).
    const natDeps = [STEP.subnet('public', zone), STEP.natIp(zone), STEP.internetGatewayAttachment];
    resource({
      id: STEP.natGateway(zone),
      deps: natDeps,
      dependsOn: natDeps,
      kind: KIND.natGateway,
      action: `Creating the NAT gateway in ${zone}`,
      data: { zone },
      input: (id) => ({
        SubnetId: id(STEP.subnet('public', zone)),
        AllocationId: id(STEP.natIp(zone)),
        ConnectivityType: 'public',
        // Same token on a re-run: AWS returns the gateway the interrupted run asked for.
        ClientToken: `${request.uid}-${STEP.natGateway(zone)}`.slice(0, 64),
        TagSpecifications: tagSpec('natgateway', `nat-${zone}`),
      }),
    });
    routeTable(`route-table-private-${zone}`, `private-${zone}`);
    defaultRoute(
      `route-private-${zone}`,
      `route-table-private-${zone}`,
      [STEP.natGateway(zone)],
      STEP.natGateway(zone),
      'NatGatewayId',
    );
    associate(`association-private-${zone}`, `route-table-private-${zone}`, STEP.subnet('private', zone));
  });

  const groupName = awsName(request, 'nodes', 255);
  resource({
    id: STEP.securityGroup,
    deps: [STEP.vpc],
    dependsOn: [STEP.vpc],
    kind: KIND.securityGroup,
    action: 'Creating the security group',
    input: (id) => ({
      GroupName: groupName,
      Description: `Constellation cluster ${request.name} (${request.uid}) nodes and load balancer`,
      VpcId: id(STEP.vpc),
      TagSpecifications: tagSpec('security-group', 'nodes'),
    }),
  });
  // Cluster-internal traffic within the VPC; the load balancer's ports from anywhere (an NLB keeps client IPs).
  steps.push({
    id: 'security-group-rules',
    deps: [STEP.securityGroup],
    kind: 'security-group-rules',
    action: 'Opening the ports in the security group',
    input: (id) => ({
      GroupId: id(STEP.securityGroup),
      IpPermissions: [
        { IpProtocol: '-1', IpRanges: [{ CidrIp: VPC_CIDR, Description: 'cluster-internal traffic' }] },
        ...LOAD_BALANCER_PORTS.map((p) => ({
          IpProtocol: 'tcp',
          FromPort: p.port,
          ToPort: p.port,
          IpRanges: [{ CidrIp: '0.0.0.0/0', Description: p.name }],
        })),
        // Kubernetes' NodePort services, open as upstream opens them.
        {
          IpProtocol: 'tcp',
          FromPort: NODE_PORT_RANGE.from,
          ToPort: NODE_PORT_RANGE.to,
          IpRanges: [{ CidrIp: '0.0.0.0/0', Description: 'K8s node ports' }],
        },
      ],
    }),
  });

  // The load balancer: the config's zone with one elastic IP (the cluster endpoint), and every control-plane zone.
  elasticIp(STEP.loadBalancerIp, `lb-${config.zone}`);
  const lbZones = [
    ...new Set([config.zone, ...request.nodeGroups.filter((g) => g.role === 'control-plane').map(groupZone)]),
  ];
  const lbDeps = [
    STEP.securityGroup,
    STEP.internetGatewayAttachment,
    ...lbZones.map((z) => STEP.subnet('public', z)),
    STEP.loadBalancerIp,
  ];
  resource({
    id: STEP.loadBalancer,
    deps: lbDeps,
    dependsOn: lbDeps,
    kind: KIND.loadBalancer,
    action: 'Creating the load balancer',
    // Same name and settings on a re-run: AWS returns the existing load balancer.
    input: (id) => ({
      Name: awsName(request, 'lb', 32),
      Type: 'network',
      Scheme: 'internet-facing',
      IpAddressType: 'ipv4',
      SubnetMappings: lbZones.map((z) =>
        z === config.zone
          ? { SubnetId: id(STEP.subnet('public', z)), AllocationId: id(STEP.loadBalancerIp) }
          : { SubnetId: id(STEP.subnet('public', z)) },
      ),
      SecurityGroups: [id(STEP.securityGroup)],
      Tags: toTagList(clusterTags(request, awsName(request, 'lb', 255))),
    }),
  });
  // Cross-zone load balancing (off by default on network load balancers): the one zone's address must reach
  // control-plane nodes in every zone. Setting it again changes nothing.
  steps.push({
    id: 'load-balancer-cross-zone',
    deps: [STEP.loadBalancer],
    kind: 'load-balancer-attributes',
    action: 'Turning on cross-zone load balancing',
    input: (id) => ({
      LoadBalancerArn: id(STEP.loadBalancer),
      Attributes: [{ Key: 'load_balancing.cross_zone.enabled', Value: 'true' }],
    }),
  });
  steps.push({
    id: 'load-balancer-active',
    deps: [STEP.loadBalancer],
    kind: 'wait-load-balancer',
    loadBalancer: STEP.loadBalancer,
  });
  for (const p of LOAD_BALANCER_PORTS) {
    resource(targetGroupStep(request, p));
    steps.push({
      id: `target-group-attributes-${p.port}`,
      deps: [STEP.targetGroup(p.port)],
      kind: 'target-group-attributes',
      action: `Setting the attributes of the target group for port ${p.port}`,
      input: (id) => ({
        TargetGroupArn: id(STEP.targetGroup(p.port)),
        Attributes: [
          { Key: 'preserve_client_ip.enabled', Value: 'false' },
          { Key: 'deregistration_delay.timeout_seconds', Value: String(DEREGISTRATION_DELAY_SECONDS) },
        ],
      }),
    });
    const listenerDeps = [STEP.loadBalancer, STEP.targetGroup(p.port)];
    resource({
      id: `listener-${p.port}`,
      deps: listenerDeps,
      dependsOn: listenerDeps,
      kind: KIND.listener,
      action: `Creating the listener for port ${p.port}`,
      data: { port: p.port },
      input: (id) => ({
        LoadBalancerArn: id(STEP.loadBalancer),
        Protocol: 'TCP',
        Port: p.port,
        DefaultActions: [{ Type: 'forward', TargetGroupArn: id(STEP.targetGroup(p.port)) }],
      }),
    });
  }

  for (const g of request.nodeGroups) {
    resource(launchTemplateStep(request, config, g, cpu.get(g.name)!));
    const zone = groupZone(g);
    // Nodes need their NAT route at boot (images, time); control-plane nodes join the target groups.
    const deps = [
      STEP.launchTemplate(g.name),
      STEP.subnet('private', zone),
      `route-private-${zone}`,
      `association-private-${zone}`,
    ];
    const targetGroups =
      g.role === 'control-plane' ? LOAD_BALANCER_PORTS.map((p) => STEP.targetGroup(p.port)) : undefined;
    if (targetGroups) deps.push(...targetGroups);
    const name = awsName(request, g.name, 255);
    const tags = { ...clusterTags(request, name), ...nodeTags(request, g.name, g.role) };
    resource({
      id: STEP.autoScalingGroup(g.name),
      deps,
      dependsOn: deps,
      kind: KIND.autoScalingGroup,
      action: `Creating the auto scaling group of node group ${g.name}`,
      data: { nodeGroup: g.name, role: g.role, zone },
      input: (id) => ({
        AutoScalingGroupName: name,
        LaunchTemplate: { LaunchTemplateId: id(STEP.launchTemplate(g.name)), Version: '$Latest' },
        MinSize: 0,
        MaxSize: Math.max(10, g.initialCount),
        DesiredCapacity: g.initialCount,
        VPCZoneIdentifier: id(STEP.subnet('private', zone)),
        TargetGroupARNs: targetGroups?.map(id),
        HealthCheckType: 'EC2',
        Tags: Object.entries(tags).map(([Key, Value]) => ({
          Key,
          Value,
          PropagateAtLaunch: true,
          ResourceId: name,
          ResourceType: 'auto-scaling-group',
        })),
      }),
    });
    steps.push({
      id: `capacity-${g.name}`,
      deps: [STEP.autoScalingGroup(g.name)],
      kind: 'wait-capacity',
      target: (id) => ({
        groupName: id(STEP.autoScalingGroup(g.name)),
        nodeGroup: g.name,
        desired: g.initialCount,
        instanceType: g.instanceType,
        zone,
      }),
    });
  }
  return { config, zones, steps, elasticIpSteps: steps.filter((st) => st.kind === KIND.elasticIp).map((st) => st.id) };
}

function targetGroupStep(request: CreateRequest, p: LoadBalancerPort): ResourceStep {
  return {
    id: STEP.targetGroup(p.port),
    deps: [STEP.vpc],
    dependsOn: [STEP.vpc],
    kind: KIND.targetGroup,
    action: `Creating the target group for port ${p.port}`,
    data: { port: p.port },
    input: (id) => ({
      Name: awsName(request, String(p.port), 32),
      Protocol: 'TCP',
      Port: p.port,
      VpcId: id(STEP.vpc),
      TargetType: 'instance',
      HealthCheckEnabled: true,
      HealthCheckProtocol: p.healthCheck.protocol,
      HealthCheckPort: 'traffic-port',
      HealthCheckPath: p.healthCheck.path,
      HealthCheckIntervalSeconds: 10,
      HealthyThresholdCount: 2,
      UnhealthyThresholdCount: 2,
      Tags: toTagList(clusterTags(request, awsName(request, p.name, 255))),
    }),
  };
}

/**
 * io1/io2 volumes need Iops (EC2 refuses the launch without it): 3000, as gp3's baseline, within io2's 100 minimum
 * and 500 IOPS per GiB.
 */
export function provisionedIops(g: Pick<NodeGroupSpec, 'stateDiskType' | 'stateDiskSizeGB'>): { Iops?: number } {
  if (g.stateDiskType !== 'io1' && g.stateDiskType !== 'io2') return {};
  return { Iops: Math.max(100, Math.min(3000, 500 * g.stateDiskSizeGB)) };
}

/** A node group's launch template: image, size, instance profile of its role, state disk, confidential settings, tags. */
function launchTemplateStep(
  request: CreateRequest,
  config: AwsConfig,
  g: NodeGroupSpec,
  cpu: ReturnType<typeof confidentialSettings>,
): ResourceStep {
  const name = awsName(request, g.name, 125);
  const tags = toTagList({ ...clusterTags(request, name), ...nodeTags(request, g.name, g.role) });
  return {
    id: STEP.launchTemplate(g.name),
    deps: [STEP.securityGroup, 'image'],
    dependsOn: [STEP.securityGroup],
    kind: KIND.launchTemplate,
    action: `Creating the launch template of node group ${g.name}`,
    data: { nodeGroup: g.name },
    input: (id) => ({
      LaunchTemplateName: name,
      ClientToken: `${request.uid}-lt-${g.name}`.slice(0, 64),
      LaunchTemplateData: {
        ImageId: request.image,
        InstanceType: g.instanceType as _InstanceType,
        IamInstanceProfile: {
          Name: g.role === 'control-plane' ? config.iamProfileControlPlane : config.iamProfileWorkerNodes,
        },
        SecurityGroupIds: [id(STEP.securityGroup)],
        MetadataOptions: { HttpEndpoint: 'enabled', HttpTokens: 'required', HttpPutResponseHopLimit: 2 },
        BlockDeviceMappings: [
          {
            // The state disk; the node encrypts it with the key the join service derives (docs/design.md#keys-and-identities).
            DeviceName: '/dev/sdb',
            Ebs: {
              VolumeSize: g.stateDiskSizeGB,
              VolumeType: g.stateDiskType as VolumeType,
              ...provisionedIops(g),
              DeleteOnTermination: true,
              Encrypted: true,
            },
          },
        ],
        ...cpu,
        TagSpecifications: [
          { ResourceType: 'instance', Tags: tags },
          { ResourceType: 'volume', Tags: tags },
        ],
      },
      TagSpecifications: [{ ResourceType: 'launch-template', Tags: tags }],
    }),
  };
}
