/**
 * The fake's Elastic Load Balancing v2 API (AWS Query protocol): network load balancers (provisioning, then
 * active; deleting takes as long), target groups, listeners and tags, with AWS's idempotent creates (same
 * name and settings return the existing resource) and its error codes. Load balancer attributes are kept
 * (cross-zone load balancing is off by default for network load balancers, as in AWS), and targetsBehind()
 * models which instances a connection to one of the load balancer's addresses can reach: the running instances of
 * the groups attached to the listener's target group that were not deregistered, in the address's zone only unless
 * cross-zone load balancing is on, and never in a zone the load balancer is not enabled in (Elastic Load Balancing
 * User Guide, "Cross-zone load balancing" and "Target health status": a target in a zone that is not enabled is
 * `unused` with reason `Target.NotInUse`, even with cross-zone load balancing on).
 * DeregisterTargets puts a target into `draining` for the deregistration delay (FakeAwsState.drainMs, else
 * lroMs), after which it is gone from the target group (ELB API reference, DeregisterTargets / DescribeTargetHealth).
 * Target group attributes are checked against the keys the API accepts for TCP target groups of a network load
 * balancer (ModifyTargetGroupAttributes, "TargetGroupAttribute"); an unknown key is a ValidationError.
 */
import { type FakeAwsState, type Instance, type LoadBalancer, type TargetGroup } from './state.js';
import {
  AwsFault,
  list,
  num,
  oneOf,
  queryTags,
  required,
  str,
  tagsFromList,
  type Params,
  type XmlValue,
} from './wire.js';

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
      LoadBalancerAddresses: m.allocationId
        ? [{ AllocationId: m.allocationId, IpAddress: s.addresses.get(m.allocationId)?.publicIp }]
        : [],
    })),
  };
}

const ATTRIBUTE_DEFAULTS: Record<string, string> = {
  'load_balancing.cross_zone.enabled': 'false',
  'deletion_protection.enabled': 'false',
};

function attributesXml(lb: LoadBalancer): XmlValue {
  return Object.entries({ ...ATTRIBUTE_DEFAULTS, ...lb.attributes }).map(([Key, Value]) => ({ Key, Value }));
}

/** Instances a connection to publicIp:port can reach through the load balancer holding that address (see the header). */
export function targetsBehind(s: FakeAwsState, publicIp: string, port: number): string[] {
  s.settle();
  const address = [...s.addresses.values()].find((a) => a.publicIp === publicIp);
  const lb = address?.holder ? s.loadBalancers.get(address.holder) : undefined;
  if (!lb || !address) return [];
  const zone = s.subnets.get(
    lb.subnetMappings.find((m) => m.allocationId === address.allocationId)?.subnetId ?? '',
  )?.zone;
  const crossZone = { ...ATTRIBUTE_DEFAULTS, ...lb.attributes }['load_balancing.cross_zone.enabled'] === 'true';
  const listener = [...s.listeners.values()].find((l) => l.loadBalancerArn === lb.arn && l.port === port);
  const tg = listener?.targetGroupArn ? s.targetGroups.get(listener.targetGroupArn) : undefined;
  if (!tg) return [];
  return targets(s, tg)
    .filter((t) => t.state === 'healthy' && (crossZone || t.instance.zone === zone))
    .map((t) => t.instance.id);
}

/** Zones the load balancer is enabled in: those of its subnet mappings. */
function enabledZones(s: FakeAwsState, lb: LoadBalancer): Set<string> {
  return new Set(lb.subnetMappings.map((m) => s.subnets.get(m.subnetId)?.zone ?? ''));
}

type TargetState = 'initial' | 'healthy' | 'unused' | 'draining';

/** The target group's targets as DescribeTargetHealth reports them (see the header). */
function targets(s: FakeAwsState, tg: TargetGroup): { instance: Instance; state: TargetState; reason?: string }[] {
  const lbs = [...s.listeners.values()]
    .filter((l) => l.targetGroupArn === tg.arn)
    .map((l) => s.loadBalancers.get(l.loadBalancerArn))
    .filter((lb): lb is LoadBalancer => lb !== undefined);
  const zones = new Set(lbs.flatMap((lb) => [...enabledZones(s, lb)]));
  const drainMs = s.drainMs ?? s.lroMs;
  const groups = [...s.autoScalingGroups.values()].filter((g) => g.targetGroupArns.includes(tg.arn));
  const out: { instance: Instance; state: TargetState; reason?: string }[] = [];
  for (const instance of s.instances.values()) {
    if (!groups.some((g) => g.name === instance.groupName)) continue;
    const state = s.instanceState(instance);
    if (state === 'terminated' || state === 'shutting-down') continue;
    const deregisteredAt = tg.deregistered.get(instance.id);
    if (deregisteredAt !== undefined) {
      if (s.now() < deregisteredAt + drainMs)
        out.push({ instance, state: 'draining', reason: 'Target.DeregistrationInProgress' });
      continue;
    }
    if (lbs.length === 0) out.push({ instance, state: 'unused', reason: 'Target.NotRegistered' });
    else if (!zones.has(instance.zone)) out.push({ instance, state: 'unused', reason: 'Target.NotInUse' });
    else
      out.push({
        instance,
        state: state === 'running' ? 'healthy' : 'initial',
        reason: state === 'running' ? undefined : 'Elb.RegistrationInProgress',
      });
  }
  return out;
}

/** Keys ModifyTargetGroupAttributes accepts for a TCP target group of a network load balancer, with AWS's defaults. */
export const TARGET_GROUP_ATTRIBUTE_DEFAULTS: Record<string, string> = {
  'deregistration_delay.timeout_seconds': '300',
  'deregistration_delay.connection_termination.enabled': 'false',
  'preserve_client_ip.enabled': 'true',
  'proxy_protocol_v2.enabled': 'false',
  'stickiness.enabled': 'false',
  'stickiness.type': 'source_ip',
  'load_balancing.cross_zone.enabled': 'use_load_balancer_configuration',
  'target_health_state.unhealthy.connection_termination.enabled': 'true',
};

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
    LoadBalancerArns: [...s.listeners.values()]
      .filter((l) => l.targetGroupArn === tg.arn)
      .map((l) => l.loadBalancerArn),
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
    // Enums of CreateLoadBalancer (ELB API reference).
    oneOf(p, 'Type', ['application', 'network', 'gateway']);
    oneOf(p, 'Scheme', ['internet-facing', 'internal']);
    oneOf(p, 'IpAddressType', ['ipv4', 'dualstack', 'dualstack-without-public-ipv4']);
    const mappings = list(p, 'SubnetMappings').map((m) => ({
      subnetId: str(m, 'SubnetId') ?? '',
      allocationId: str(m, 'AllocationId'),
    }));
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
      if (
        scheme === 'internet-facing' &&
        ![...s.internetGateways.values()].some((g) => g.attachments.includes(subnet.vpcId))
      ) {
        throw new AwsFault('InvalidSubnet', `VPC ${subnet.vpcId} has no internet gateway`);
      }
      if (m.allocationId) {
        const a = s.addresses.get(m.allocationId);
        if (!a) throw new AwsFault('AllocationIdNotFound', `The allocation ID '${m.allocationId}' is not valid`);
        if (a.holder)
          throw new AwsFault('InvalidConfigurationRequest', `The allocation ID '${m.allocationId}' is already in use`);
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
    // Enums of CreateTargetGroup (ELB API reference); a network load balancer's health check is TCP, HTTP or HTTPS.
    oneOf(p, 'Protocol', ['HTTP', 'HTTPS', 'TCP', 'TLS', 'UDP', 'TCP_UDP', 'GENEVE']);
    oneOf(p, 'HealthCheckProtocol', ['HTTP', 'HTTPS', 'TCP']);
    oneOf(p, 'TargetType', ['instance', 'ip', 'lambda', 'alb']);
    if (str(p, 'HealthCheckProtocol') === 'TCP' && str(p, 'HealthCheckPath') !== undefined)
      throw new AwsFault('ValidationError', 'Health check path is not supported for TCP health checks');
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
      healthCheck: {
        protocol: str(p, 'HealthCheckProtocol'),
        port: str(p, 'HealthCheckPort'),
        path: str(p, 'HealthCheckPath'),
        enabled: str(p, 'HealthCheckEnabled'),
      },
      tags: tagsFromList(list(p, 'Tags')),
      attributes: {},
      deregistered: new Map(),
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
  ModifyTargetGroupAttributes(s, p) {
    const tg = s.targetGroups.get(required(p, 'TargetGroupArn'));
    if (!tg) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    for (const a of list(p, 'Attributes')) {
      const key = required(a, 'Key');
      if (!(key in TARGET_GROUP_ATTRIBUTE_DEFAULTS))
        throw new AwsFault('ValidationError', `Attribute key '${key}' is not recognized`);
      tg.attributes[key] = str(a, 'Value') ?? '';
    }
    return {
      Attributes: Object.entries({ ...TARGET_GROUP_ATTRIBUTE_DEFAULTS, ...tg.attributes }).map(([Key, Value]) => ({
        Key,
        Value,
      })),
    };
  },
  DescribeTargetGroupAttributes(s, p) {
    const tg = s.targetGroups.get(required(p, 'TargetGroupArn'));
    if (!tg) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    return {
      Attributes: Object.entries({ ...TARGET_GROUP_ATTRIBUTE_DEFAULTS, ...tg.attributes }).map(([Key, Value]) => ({
        Key,
        Value,
      })),
    };
  },
  DeregisterTargets(s, p) {
    const tg = s.targetGroups.get(required(p, 'TargetGroupArn'));
    if (!tg) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    for (const t of list(p, 'Targets')) {
      const id = required(t, 'Id');
      if (!s.instances.has(id))
        throw new AwsFault('InvalidTarget', `The following targets are not valid instances: '${id}'`);
      if (!tg.deregistered.has(id)) tg.deregistered.set(id, s.now());
    }
    return {};
  },
  DescribeTargetHealth(s, p) {
    s.settle();
    const tg = s.targetGroups.get(required(p, 'TargetGroupArn'));
    if (!tg) throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    const wanted = list(p, 'Targets').map((t) => str(t, 'Id'));
    const all = targets(s, tg).filter((t) => wanted.length === 0 || wanted.includes(t.instance.id));
    return {
      TargetHealthDescriptions: all.map((t) => ({
        Target: { Id: t.instance.id, Port: tg.port, AvailabilityZone: t.instance.zone },
        HealthCheckPort: String(tg.port),
        TargetHealth: { State: t.state, Reason: t.reason },
      })),
    };
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
    if (!visibleLoadBalancers(s).some((lb) => lb.arn === lbArn))
      throw new AwsFault('LoadBalancerNotFound', 'One or more load balancers not found');
    const port = num(p, 'Port') ?? 0;
    const targetGroupArn = str(list(p, 'DefaultActions')[0] ?? {}, 'TargetGroupArn');
    if (targetGroupArn && !s.targetGroups.has(targetGroupArn))
      throw new AwsFault('TargetGroupNotFound', 'One or more target groups not found');
    const existing = [...s.listeners.values()].find((l) => l.loadBalancerArn === lbArn && l.port === port);
    if (existing && existing.targetGroupArn !== targetGroupArn)
      throw new AwsFault('DuplicateListener', 'A listener already exists on this port for this load balancer');
    const listener = existing ?? {
      arn: arn(s, 'listener/net', String(port)),
      loadBalancerArn: lbArn,
      port,
      protocol: str(p, 'Protocol') ?? 'TCP',
      targetGroupArn,
    };
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
