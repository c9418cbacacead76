/**
 * The fake's Elastic Load Balancing v2 API (AWS Query protocol): network load balancers (provisioning, then
 * active; deleting takes as long), target groups, listeners and tags, with AWS's idempotent creates (same
 * name and settings return the existing resource) and its error codes. Load balancer attributes are kept
 * (cross-zone load balancing is off by default for network load balancers, as in AWS), and targetsBehind()
 * models which instances a connection to one of the load balancer's addresses can reach: the control-plane
 * instances of the groups registered with the listener's target group, in the address's zone only unless
 * cross-zone load balancing is on.
 */
import { type FakeAwsState, type LoadBalancer, type TargetGroup } from './state.js';
import { AwsFault, list, num, queryTags, required, str, tagsFromList, type Params, type XmlValue } from './wire.js';

type Handler = (s: FakeAwsState, p: Params) => Record<string, XmlValue>;

function lbXml(s: FakeAwsState, lb: LoadBalancer): XmlValue {
  return {
    LoadBalancerArn: lb.arn,
    LoadBalancerName: lb.name,
    DNSName: lb.dnsName,
    Scheme: lb.scheme,
    Type: lb.type,
    VpcId: s.subnets.get(lb.subnetMappings[0]?.subnetId ?? '')?.vpcId,
    State: { Code: s.loadBalancerState(lb) === 'active' ? 'active' : 'provisioning' },
    SecurityGroups: lb.securityGroups,
    AvailabilityZones: lb.subnetMappings.map((m) => ({
      SubnetId: m.subnetId,
      ZoneName: s.subnets.get(m.subnetId)?.zone,
      LoadBalancerAddresses: m.allocationId ? [{ AllocationId: m.allocationId, IpAddress: s.addresses.get(m.allocationId)?.publicIp }] : [],
    })),
  };
}

const ATTRIBUTE_DEFAULTS: Record<string, string> = { 'load_balancing.cross_zone.enabled': 'false', 'deletion_protection.enabled': 'false' };

function attributesXml(lb: LoadBalancer): XmlValue {
  return Object.entries({ ...ATTRIBUTE_DEFAULTS, ...lb.attributes }).map(([Key, Value]) => ({ Key, Value }));
}

/** Instances a connection to publicIp:port can reach through the load balancer holding that address (see the header). */
export function targetsBehind(s: FakeAwsState, publicIp: string, port: number): string[] {
  s.settle();
  const address = [...s.addresses.values()].find((a) => a.publicIp === publicIp);
  const lb = address?.holder ? s.loadBalancers.get(address.holder) : undefined;
  if (!lb || !address) return [];
  const zone = s.subnets.get(lb.subnetMappings.find((m) => m.allocationId === address.allocationId)?.subnetId ?? '')?.zone;
  const crossZone = ({ ...ATTRIBUTE_DEFAULTS, ...lb.attributes })['load_balancing.cross_zone.enabled'] === 'true';
  const listener = [...s.listeners.values()].find((l) => l.loadBalancerArn === lb.arn && l.port === port);
  if (!listener?.targetGroupArn) return [];
  const groups = [...s.autoScalingGroups.values()].filter((g) => g.targetGroupArns.includes(listener.targetGroupArn!));
  return [...s.instances.values()]
    .filter((i) => groups.some((g) => g.name === i.groupName) && s.instanceState(i) === 'running' && (crossZone || i.zone === zone))
    .map((i) => i.id);
}

function tgXml(tg: TargetGroup, s: FakeAwsState): XmlValue {
  return {
    TargetGroupArn: tg.arn,
    TargetGroupName: tg.name,
    Protocol: tg.protocol,
    Port: tg.port,
    VpcId: tg.vpcId,
    HealthCheckEnabled: tg.healthCheck.enabled !== 'false',
    HealthCheckProtocol: tg.healthCheck.protocol,
    HealthCheckPort: tg.healthCheck.port,
    HealthCheckPath: tg.healthCheck.path,
    LoadBalancerArns: [...s.listeners.values()].filter((l) => l.targetGroupArn === tg.arn).map((l) => l.loadBalancerArn),
  };
}

function arn(s: FakeAwsState, kind: string, name: string): string {
  return `arn:aws:elasticloadbalancing:${s.region}:${s.account}:${kind}/${name}/${s.newId('x').slice(2, 18)}`;
}

function visibleLoadBalancers(s: FakeAwsState): LoadBalancer[] {
  s.settle();
  return [...s.loadBalancers.values()];
}

export const elbHandlers: Record<string, Handler> = {
  CreateLoadBalancer(s, p) {
    const name = required(p, 'Name');
    const mappings = list(p, 'SubnetMappings').map((m) => ({ subnetId: str(m, 'SubnetId') ?? '', allocationId: str(m, 'AllocationId') }));
    const existing = visibleLoadBalancers(s).find((lb) => lb.name === name);
    if (existing) {
      // Same name and settings: AWS answers with the existing load balancer.
      if (JSON.stringify(existing.subnetMappings) !== JSON.stringify(mappings)) {
        throw new AwsFault('DuplicateLoadBalancerName', `A load balancer with the name '${name}' already exists`);
      }
      return { LoadBalancers: [lbXml(s, existing)] };
    }
    if (mappings.length === 0) throw new AwsFault('ValidationError', 'At least one subnet must be specified');
    for (const m of mappings) {
      const subnet = s.subnets.get(m.subnetId);
      if (!subnet) throw new AwsFault('SubnetNotFound', `The subnet ID '${m.subnetId}' is not valid`);
      const scheme = str(p, 'Scheme') ?? 'internet-facing';
      if (scheme === 'internet-facing' && ![...s.internetGateways.values()].some((g) => g.attachments.includes(subnet.vpcId))) {
        throw new AwsFault('InvalidSubnet', `VPC ${subnet.vpcId} has no internet gateway`);
      }
      if (m.allocationId) {
        const a = s.addresses.get(m.allocationId);
        if (!a) throw new AwsFault('AllocationIdNotFound', `The allocation ID '${m.allocationId}' is not valid`);
        if (a.holder) throw new AwsFault('InvalidConfigurationRequest', `The allocation ID '${m.allocationId}' is already in use`);
      }
    }
    const lb: LoadBalancer = {
      arn: arn(s, 'loadbalancer/net', name),
      name,
      dnsName: `${name}-${s.newId('x').slice(-10)}.elb.${s.region}.amazonaws.com`,
      type: str(p, 'Type') ?? 'application',
      scheme: str(p, 'Scheme') ?? 'internet-facing',
      subnetMappings: mappings,
      securityGroups: list<string>(p, 'SecurityGroups'),
      createdAt: s.now(),
      tags: tagsFromList(list(p, 'Tags')),
      attributes: {},
    };
    s.loadBalancers.set(lb.arn, lb);
    for (const m of mappings) if (m.allocationId) s.addresses.get(m.allocationId)!.holder = lb.arn;
    return { LoadBalancers: [lbXml(s, lb)] };
  },
  DescribeLoadBalancers(s, p) {
    const arns = list<string>(p, 'LoadBalancerArns');
    const all = visibleLoadBalancers(s);
    const found = arns.length ? all.filter((lb) => arns.includes(lb.arn)) : all;
    if (found.length < arns.length) throw new AwsFault('LoadBalancerNotFound', 'One or more load balancers not found');
    return { LoadBalancers: found.map((lb) => lbXml(s, lb)) };
  },
  ModifyLoadBalancerAttributes(s, p) {
    const lb = visibleLoadBalancers(s).find((l) => l.arn === required(p, 'LoadBalancerArn'));
    if (!lb) throw new AwsFault('LoadBalancerNotFound', 'One or more load balancers not found');
    for (const a of list(p, 'Attributes')) lb.attributes[str(a, 'Key') ?? ''] = str(a, 'Value') ?? '';
    return { Attributes: attributesXml(lb) };
  },
  DescribeLoadBalancerAttributes(s, p) {
    const lb = visibleLoadBalancers(s).find((l) => l.arn === required(p, 'LoadBalancerArn'));
    if (!lb) throw new AwsFault('LoadBalancerNotFound', 'One or more load balancers not found');
    return { Attributes: attributesXml(lb) };
  },
  DeleteLoadBalancer(s, p) {
    const lb = s.loadBalancers.get(required(p, 'LoadBalancerArn'));
    // Deleting a load balancer that does not exist succeeds, as in AWS.
    if (lb) lb.deletedAt ??= s.now();
    return {};
  },

  CreateTargetGroup(s, p) {
    const name = required(p, 'Name');
    const existing = [...s.targetGroups.values()].find((t) => t.name === name);
    if (existing) return { TargetGroups: [tgXml(existing, s)] };
    const vpcId = required(p, 'VpcId');
    if (!s.vpcs.has(vpcId)) throw new AwsFault('ValidationError', `The VPC ID '${vpcId}' is not found`);
    const tg: TargetGroup = {
      arn: arn(s, 'targetgroup', name),
      name,
      vpcId,
      port: num(p, 'Port') ?? 0,
      protocol: str(p, 'Protocol') ?? 'TCP',
      healthCheck: { protocol: str(p, 'HealthCheckProtocol'), port: str(p, 'HealthCheckPort'), path: str(p, 'HealthCheckPath'), enabled: str(p, 'HealthCheckEnabled') },
      tags: tagsFromList(list(p, 'Tags')),
    };
    s.targetGroups.set(tg.arn, tg);
    return { TargetGroups: [tgXml(tg, s)] };
  },
  DescribeTargetGroups(s, p) {
    const arns = list<string>(p, 'TargetGroupArns');
    const all = [...s.targetGroups.values()];
    const found = arns.length ? all.filter((t) => arns.includes(t.arn)) : all;
    if (found.length < arns.length) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    return { TargetGroups: found.map((t) => tgXml(t, s)) };
  },
  DeleteTargetGroup(s, p) {
    const tgArn = required(p, 'TargetGroupArn');
    s.settle();
    if ([...s.listeners.values()].some((l) => l.targetGroupArn === tgArn)) {
      throw new AwsFault('ResourceInUse', `Target group '${tgArn}' is currently in use by a listener or a rule`);
    }
    s.targetGroups.delete(tgArn);
    return {};
  },

  CreateListener(s, p) {
    const lbArn = required(p, 'LoadBalancerArn');
    if (!visibleLoadBalancers(s).some((lb) => lb.arn === lbArn)) throw new AwsFault('LoadBalancerNotFound', 'One or more load balancers not found');
    const port = num(p, 'Port') ?? 0;
    const targetGroupArn = str(list(p, 'DefaultActions')[0] ?? {}, 'TargetGroupArn');
    if (targetGroupArn && !s.targetGroups.has(targetGroupArn)) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    const existing = [...s.listeners.values()].find((l) => l.loadBalancerArn === lbArn && l.port === port);
    if (existing && existing.targetGroupArn !== targetGroupArn) throw new AwsFault('DuplicateListener', 'A listener already exists on this port for this load balancer');
    const listener = existing ?? { arn: arn(s, 'listener/net', String(port)), loadBalancerArn: lbArn, port, protocol: str(p, 'Protocol') ?? 'TCP', targetGroupArn };
    s.listeners.set(listener.arn, listener);
    return {
      Listeners: [
        {
          ListenerArn: listener.arn,
          LoadBalancerArn: lbArn,
          Port: port,
          Protocol: listener.protocol,
          DefaultActions: [{ Type: 'forward', TargetGroupArn: targetGroupArn }],
        },
      ],
    };
  },
  DeleteListener(s, p) {
    const listenerArn = required(p, 'ListenerArn');
    s.settle();
    if (!s.listeners.has(listenerArn)) throw new AwsFault('ListenerNotFound', 'One or more listeners not found');
    s.listeners.delete(listenerArn);
    return {};
  },

  DescribeTags(s, p) {
    s.settle();
    const descriptions = list<string>(p, 'ResourceArns').map((resourceArn) => {
      const tagged = s.loadBalancers.get(resourceArn) ?? s.targetGroups.get(resourceArn);
      if (!tagged) throw new AwsFault('LoadBalancerNotFound', 'One or more resources not found');
      return { ResourceArn: resourceArn, Tags: queryTags(tagged.tags) };
    });
    return { TagDescriptions: descriptions };
  },
};
