/**
 * The fake AWS's state: every resource the handlers make, with long-running states computed from time
 * (a NAT gateway is `pending` for `lroMs` after it was accepted, then `available`; deleting likewise), and
 * EC2-style filters (`tag:<key>`, `vpc-id`, ...). One account, one region.
 */
import type { Params } from './wire.js';
import { list, str } from './wire.js';
import { InjectedErrors } from '../injected.js';

export interface Tagged {
  tags: Record<string, string>;
}

export interface Vpc extends Tagged {
  id: string;
  cidr: string;
}
export interface Subnet extends Tagged {
  id: string;
  vpcId: string;
  cidr: string;
  zone: string;
}
export interface InternetGateway extends Tagged {
  id: string;
  attachments: string[];
}
export interface Address extends Tagged {
  allocationId: string;
  publicIp: string;
  /** NAT gateway id or load balancer ARN holding the address. */
  holder?: string;
}
export interface NatGateway extends Tagged {
  id: string;
  vpcId: string;
  subnetId: string;
  allocationId: string;
  clientToken?: string;
  createdAt: number;
  deletedAt?: number;
}
export interface RouteTable extends Tagged {
  id: string;
  vpcId: string;
  main: boolean;
  routes: { destination: string; gatewayId?: string; natGatewayId?: string }[];
  associations: { id: string; subnetId?: string; main: boolean }[];
}
export interface SecurityGroup extends Tagged {
  id: string;
  vpcId: string;
  name: string;
  isDefault: boolean;
  ingress: Params[];
}
export interface LaunchTemplate extends Tagged {
  id: string;
  name: string;
  clientToken?: string;
  /** LaunchTemplateData of the latest version ($Latest, what the auto scaling groups launch), parsed tree. */
  data: Params;
  /** Every version's data, version 1 first (CreateLaunchTemplateVersion appends). */
  versions: Params[];
}
export interface Image {
  id: string;
  bootMode?: string;
  tpmSupport?: string;
}
export interface Instance extends Tagged {
  id: string;
  groupName?: string;
  launchTemplateId: string;
  subnetId: string;
  zone: string;
  privateIp: string;
  instanceType: string;
  imageId: string;
  /** The launch template version it was launched from. */
  launchTemplateVersion?: number;
  launchedAt: number;
  terminatedAt?: number;
}
export interface LoadBalancer extends Tagged {
  /** Attributes set with ModifyLoadBalancerAttributes (AWS's defaults apply to the rest). */
  attributes: Record<string, string>;
  arn: string;
  name: string;
  dnsName: string;
  type: string;
  scheme: string;
  subnetMappings: { subnetId: string; allocationId?: string }[];
  securityGroups: string[];
  createdAt: number;
  deletedAt?: number;
}
export interface TargetGroup extends Tagged {
  arn: string;
  name: string;
  vpcId: string;
  port: number;
  protocol: string;
  healthCheck: { protocol?: string; port?: string; path?: string; enabled?: string };
  /** ModifyTargetGroupAttributes (AWS's defaults apply to the rest: TARGET_GROUP_ATTRIBUTE_DEFAULTS in ./elb.ts). */
  attributes: Record<string, string>;
  /** Instances deregistered (DeregisterTargets) and when: draining for the deregistration delay, then gone. */
  deregistered: Map<string, number>;
}
export interface Listener {
  arn: string;
  loadBalancerArn: string;
  port: number;
  protocol: string;
  targetGroupArn?: string;
}
export interface AutoScalingGroup extends Tagged {
  name: string;
  launchTemplateId: string;
  minSize: number;
  maxSize: number;
  desired: number;
  subnetIds: string[];
  targetGroupArns: string[];
  /** Tags with PropagateAtLaunch true. */
  propagated: Record<string, string>;
  createdAt: number;
  deletingAt?: number;
  /** Scaling activities, newest first (DescribeScalingActivities). */
  activities: ScalingActivity[];
}
export interface ScalingActivity {
  id: string;
  description: string;
  cause: string;
  statusCode: 'Successful' | 'Failed' | 'InProgress';
  statusMessage?: string;
  at: number;
}
export interface IamRole extends Tagged {
  name: string;
  arn: string;
  assumeRolePolicy: string;
  policies: Map<string, string>;
}
export interface InstanceProfile extends Tagged {
  name: string;
  arn: string;
  roles: string[];
  createdAt: number;
}

export class FakeAwsState {
  readonly vpcs = new Map<string, Vpc>();
  readonly subnets = new Map<string, Subnet>();
  readonly internetGateways = new Map<string, InternetGateway>();
  readonly addresses = new Map<string, Address>();
  readonly natGateways = new Map<string, NatGateway>();
  readonly routeTables = new Map<string, RouteTable>();
  readonly securityGroups = new Map<string, SecurityGroup>();
  readonly launchTemplates = new Map<string, LaunchTemplate>();
  readonly images = new Map<string, Image>();
  readonly instances = new Map<string, Instance>();
  readonly loadBalancers = new Map<string, LoadBalancer>();
  readonly targetGroups = new Map<string, TargetGroup>();
  readonly listeners = new Map<string, Listener>();
  readonly autoScalingGroups = new Map<string, AutoScalingGroup>();
  readonly roles = new Map<string, IamRole>();
  readonly instanceProfiles = new Map<string, InstanceProfile>();

  readonly region = 'us-east-2';
  /** Elastic IP addresses per region: AWS's default quota is 5 (AllocateAddress answers AddressLimitExceeded). */
  addressLimit = 5;
  /**
   * Launch failures the auto scaling groups meet (instead of launching), by group name prefix: each attempt is
   * recorded as a Failed scaling activity with this status message, as EC2 reports insufficient capacity.
   */
  readonly launchFailures = new Map<string, string>();
  /** How long an instance takes to start, when not lroMs (a test's instances that never come into service). */
  bootMs?: number;
  /**
   * EC2 eventual consistency ("Eventual consistency in the Amazon EC2 API", EC2 API reference): for this long after
   * a create, the new resource's id is unknown to calls that name it (`Invalid<Resource>ID.NotFound`,
   * `InvalidGroup.NotFound`), including DescribeInstances of a just-launched instance. 0: consistent at once.
   */
  consistencyMs = 0;
  /**
   * The same eventual consistency counted in calls instead of time: the first `consistencyMisses` calls that name a new
   * resource do not find it, however long after the create they come (on a loaded machine the provider's next call may
   * come later than any window). 0: only consistencyMs.
   */
  consistencyMisses = 0;
  private readonly misses = new Map<string, number>();
  /** What the fake answered on purpose (the NotFound codes of consistencyMs, injected faults), per kind. */
  readonly injected = new InjectedErrors();
  /** How long a deregistered target drains (the deregistration delay, scaled like every operation here). */
  drainMs?: number;
  private readonly created = new Map<string, number>();
  readonly account = '123456789012';
  private counter = 0;

  /** See FakeAwsOptions. */
  privateIpBase?: string;
  publicIpBase?: string;

  constructor(
    /** Duration of every long-running operation (NAT gateway, load balancer, instance start and stop). */
    public lroMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  now(): number {
    return this.clock();
  }

  newId(prefix: string): string {
    this.counter += 1;
    const id = `${prefix}-${this.counter.toString(16).padStart(17, '0')}`;
    this.created.set(id, this.now());
    if (this.consistencyMisses > 0) this.misses.set(id, this.consistencyMisses);
    return id;
  }

  /** Made less than consistencyMs ago: calls naming it do not find it yet (see consistencyMs). */
  notYetVisible(id: string): boolean {
    const at = this.created.get(id);
    return at !== undefined && this.now() < at + this.consistencyMs;
  }

  /** A call names `id`: whether it does not find it yet (consistencyMs, or a miss left, which this call uses up). */
  namedNotYetVisible(id: string): boolean {
    if (this.notYetVisible(id)) return true;
    const left = this.misses.get(id) ?? 0;
    if (left === 0) return false;
    if (left === 1) this.misses.delete(id);
    else this.misses.set(id, left - 1);
    return true;
  }

  /**
   * EC2 has caught up with every create so far (the time a consistency window lasts has passed): the misses still owed
   * (consistencyMisses) are dropped, so a later command, e.g. terminate's, finds what create made.
   */
  caughtUp(): void {
    this.misses.clear();
  }

  nextIp(base: string): string {
    this.counter += 1;
    return `${base}.${Math.floor(this.counter / 250) % 250}.${(this.counter % 250) + 2}`;
  }

  done(since: number | undefined): boolean {
    return since !== undefined && this.now() >= since + this.lroMs;
  }

  natState(n: NatGateway): 'pending' | 'available' | 'deleting' | 'deleted' {
    if (n.deletedAt !== undefined) return this.done(n.deletedAt) ? 'deleted' : 'deleting';
    return this.done(n.createdAt) ? 'available' : 'pending';
  }

  /** Load balancers disappear once their deletion has finished; their addresses are freed then. */
  loadBalancerState(lb: LoadBalancer): 'provisioning' | 'active' | 'gone' {
    if (lb.deletedAt !== undefined && this.done(lb.deletedAt)) return 'gone';
    return this.done(lb.createdAt) ? 'active' : 'provisioning';
  }

  instanceState(i: Instance): 'pending' | 'running' | 'shutting-down' | 'terminated' {
    if (i.terminatedAt !== undefined) return this.done(i.terminatedAt) ? 'terminated' : 'shutting-down';
    return this.now() >= i.launchedAt + (this.bootMs ?? this.lroMs) ? 'running' : 'pending';
  }

  /** Applies finished deletions: gone load balancers, groups and NAT gateways release what they held. */
  settle(): void {
    for (const lb of this.loadBalancers.values()) {
      if (this.loadBalancerState(lb) === 'gone') {
        this.loadBalancers.delete(lb.arn);
        for (const l of [...this.listeners.values()]) if (l.loadBalancerArn === lb.arn) this.listeners.delete(l.arn);
      }
    }
    for (const g of this.autoScalingGroups.values()) {
      if (g.deletingAt !== undefined && this.done(g.deletingAt)) this.autoScalingGroups.delete(g.name);
    }
    for (const a of this.addresses.values()) {
      if (!a.holder) continue;
      const nat = this.natGateways.get(a.holder);
      const heldByNat = nat && this.natState(nat) !== 'deleted';
      if (!heldByNat && !this.loadBalancers.has(a.holder)) a.holder = undefined;
    }
  }

  /** Resources still alive, as "type id" strings (deleted NAT gateways and terminated instances excluded). */
  liveResources(): string[] {
    this.settle();
    const out: string[] = [];
    const add = (type: string, ids: Iterable<string>) => {
      for (const id of ids) out.push(`${type} ${id}`);
    };
    add('vpc', this.vpcs.keys());
    add('subnet', this.subnets.keys());
    add('internet-gateway', this.internetGateways.keys());
    add('address', this.addresses.keys());
    add(
      'nat-gateway',
      [...this.natGateways.values()].filter((n) => this.natState(n) !== 'deleted').map((n) => n.id),
    );
    add(
      'route-table',
      [...this.routeTables.values()].filter((t) => !t.main).map((t) => t.id),
    );
    add(
      'security-group',
      [...this.securityGroups.values()].filter((g) => !g.isDefault).map((g) => g.id),
    );
    add('launch-template', this.launchTemplates.keys());
    add(
      'instance',
      [...this.instances.values()].filter((i) => this.instanceState(i) !== 'terminated').map((i) => i.id),
    );
    add('load-balancer', this.loadBalancers.keys());
    add('target-group', this.targetGroups.keys());
    add('listener', this.listeners.keys());
    add('autoscaling-group', this.autoScalingGroups.keys());
    add('iam-role', this.roles.keys());
    add('instance-profile', this.instanceProfiles.keys());
    return out;
  }
}

/** EC2 `Filter.N` (Name, Value.M) applied to items; `attribute` answers non-tag filter names. */
export function applyFilters<T extends Tagged>(
  items: Iterable<T>,
  params: Params,
  attribute: (item: T, name: string) => string | undefined = () => undefined,
  filterParam = 'Filter',
  valueParam = 'Value',
): T[] {
  const filters = list(params, filterParam).map((f) => ({
    name: str(f, 'Name') ?? '',
    values: list<string>(f, valueParam),
  }));
  return [...items].filter((item) =>
    filters.every(({ name, values }) => {
      if (name.startsWith('tag:')) return values.includes(item.tags[name.slice(4)]);
      if (name === 'tag-key') return values.some((v) => v in item.tags);
      const actual = attribute(item, name);
      return actual !== undefined && values.includes(actual);
    }),
  );
}
