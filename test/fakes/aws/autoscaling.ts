/**
 * The fake's Auto Scaling API (AWS Query protocol): groups launch instances from their launch template up to
 * the desired capacity (instances are Pending, then InService after the operation time), scale, terminate one
 * instance, and force-delete (instances terminate, the group disappears after the operation time). Every
 * launch is a scaling activity; a launch failure set in the state (FakeAwsState.launchFailures) makes it a
 * Failed one with EC2's message, as DescribeScalingActivities reports it.
 * When the desired capacity is lowered, the group picks its own victims by the default termination policy
 * (Amazon EC2 Auto Scaling User Guide, "Configure termination policies for Amazon EC2 Auto Scaling", default policy):
 * the zone with the most instances first, then instances of an older launch template version, then the instance
 * closest to its next billing hour, then at random. Only TerminateInstanceInAutoScalingGroup removes a chosen one.
 */
import { launchInstance, launchRefusal } from './ec2.js';
import { applyFilters, type AutoScalingGroup, type FakeAwsState, type Instance } from './state.js';
import { AwsFault, list, num, oneOf, required, str, type Params, type XmlValue } from './wire.js';

type Handler = (s: FakeAwsState, p: Params) => Record<string, XmlValue>;

function members(s: FakeAwsState, g: AutoScalingGroup) {
  return [...s.instances.values()].filter((i) => i.groupName === g.name && s.instanceState(i) !== 'terminated');
}

/** Launches or terminates instances until the group runs its desired capacity. */
function reconcile(s: FakeAwsState, g: AutoScalingGroup): void {
  if (g.deletingAt !== undefined) return;
  const live = members(s, g).filter((i) => i.terminatedAt === undefined);
  const failure =
    [...s.launchFailures].find(([prefix]) => g.name.startsWith(prefix))?.[1] ??
    launchRefusal(s.launchTemplates.get(g.launchTemplateId)?.data ?? {});
  for (let n = live.length; n < g.desired; n++) {
    const activity = {
      id: s.newId('act'),
      at: s.now(),
      cause: `At ${new Date(s.now()).toISOString()} an instance was started in response to a difference between desired and actual capacity, increasing the capacity from ${n} to ${g.desired}.`,
    };
    if (failure) {
      g.activities.unshift({
        ...activity,
        description: 'Launching a new EC2 instance.  Status Reason: ' + failure,
        statusCode: 'Failed',
        statusMessage: failure,
      });
      break;
    }
    const i = launchInstance(
      s,
      g.launchTemplateId,
      g.subnetIds[n % g.subnetIds.length],
      { ...g.propagated, 'aws:autoscaling:groupName': g.name },
      g.name,
    );
    g.activities.unshift({
      ...activity,
      description: `Launching a new EC2 instance: ${i.id}`,
      statusCode: 'Successful',
    });
  }
  for (let n = live.length; n > g.desired; n--)
    terminationPolicyVictim(
      s,
      g,
      live.filter((i) => i.terminatedAt === undefined),
    ).terminatedAt = s.now();
}

/** The default termination policy's choice among the group's live instances (see the header). */
export function terminationPolicyVictim(s: FakeAwsState, g: AutoScalingGroup, live: Instance[]): Instance {
  const perZone = new Map<string, number>();
  for (const i of live) perZone.set(i.zone, (perZone.get(i.zone) ?? 0) + 1);
  const most = Math.max(...perZone.values());
  let pool = live.filter((i) => perZone.get(i.zone) === most);
  const latest = s.launchTemplates.get(g.launchTemplateId)?.versions.length ?? 1;
  const older = pool.filter((i) => (i.launchTemplateVersion ?? latest) < latest);
  if (older.length > 0) pool = older;
  const hour = 3_600_000;
  const toBillingHour = (i: Instance) => hour - ((s.now() - i.launchedAt) % hour);
  const closest = Math.min(...pool.map(toBillingHour));
  pool = pool.filter((i) => toBillingHour(i) === closest);
  return pool[Math.floor(Math.random() * pool.length)];
}

function groupXml(s: FakeAwsState, g: AutoScalingGroup): XmlValue {
  return {
    AutoScalingGroupName: g.name,
    AutoScalingGroupARN: `arn:aws:autoscaling:${s.region}:${s.account}:autoScalingGroup:${g.name}`,
    LaunchTemplate: { LaunchTemplateId: g.launchTemplateId, Version: '$Latest' },
    MinSize: g.minSize,
    MaxSize: g.maxSize,
    DesiredCapacity: g.desired,
    DefaultCooldown: 300,
    AvailabilityZones: [...new Set(g.subnetIds.map((id) => s.subnets.get(id)?.zone ?? ''))],
    HealthCheckType: 'EC2',
    CreatedTime: new Date(g.createdAt).toISOString(),
    VPCZoneIdentifier: g.subnetIds.join(','),
    TargetGroupARNs: g.targetGroupArns,
    Status: g.deletingAt !== undefined ? 'Delete in progress' : undefined,
    Instances: members(s, g).map((i) => {
      const state = s.instanceState(i);
      return {
        InstanceId: i.id,
        InstanceType: i.instanceType,
        AvailabilityZone: i.zone,
        LifecycleState: state === 'pending' ? 'Pending' : state === 'running' ? 'InService' : 'Terminating',
        HealthStatus: 'Healthy',
        LaunchTemplate: { LaunchTemplateId: g.launchTemplateId, Version: String(i.launchTemplateVersion ?? 1) },
        ProtectedFromScaleIn: false,
      };
    }),
    Tags: Object.entries(g.tags).map(([Key, Value]) => ({
      ResourceId: g.name,
      ResourceType: 'auto-scaling-group',
      Key,
      Value,
      PropagateAtLaunch: Key in g.propagated,
    })),
  };
}

function getGroup(s: FakeAwsState, name: string): AutoScalingGroup {
  s.settle();
  const g = s.autoScalingGroups.get(name);
  if (!g) throw new AwsFault('ValidationError', `AutoScalingGroup name not found - AutoScalingGroup ${name} not found`);
  return g;
}

function checkCapacity(g: AutoScalingGroup): void {
  if (g.desired < g.minSize || g.desired > g.maxSize) {
    throw new AwsFault(
      'ValidationError',
      `Desired capacity:${g.desired} must be between the specified min size:${g.minSize} and max size:${g.maxSize}`,
    );
  }
}

export const autoscalingHandlers: Record<string, Handler> = {
  CreateAutoScalingGroup(s, p) {
    const name = required(p, 'AutoScalingGroupName');
    oneOf(p, 'HealthCheckType', ['EC2', 'ELB', 'VPC_LATTICE', 'EBS']);
    s.settle();
    if (s.autoScalingGroups.has(name))
      throw new AwsFault(
        'AlreadyExists',
        `AutoScalingGroup by this name already exists - A group with the name ${name} already exists`,
      );
    const ltId = str((p.LaunchTemplate ?? {}) as Params, 'LaunchTemplateId') ?? '';
    if (!s.launchTemplates.has(ltId) || s.namedNotYetVisible(ltId)) {
      if (s.launchTemplates.has(ltId)) s.injected.hit('ValidationError (launch template not yet visible)');
      throw new AwsFault(
        'ValidationError',
        `You must use a valid fully-formed launch template. The specified launch template, with template ID ${ltId}, does not exist.`,
      );
    }
    const subnetIds = (str(p, 'VPCZoneIdentifier') ?? '').split(',').filter(Boolean);
    for (const id of subnetIds)
      if (!s.subnets.has(id) || s.namedNotYetVisible(id)) {
        if (s.subnets.has(id)) s.injected.hit('ValidationError (subnet not yet visible)');
        throw new AwsFault('ValidationError', `The subnet ID '${id}' does not exist`);
      }
    const targetGroupArns = list<string>(p, 'TargetGroupARNs');
    for (const arn of targetGroupArns)
      if (!s.targetGroups.has(arn)) throw new AwsFault('ValidationError', `Target group ${arn} not found`);
    const tags = list(p, 'Tags');
    const g: AutoScalingGroup = {
      name,
      launchTemplateId: ltId,
      minSize: num(p, 'MinSize') ?? 0,
      maxSize: num(p, 'MaxSize') ?? 0,
      desired: num(p, 'DesiredCapacity') ?? num(p, 'MinSize') ?? 0,
      subnetIds,
      targetGroupArns,
      tags: Object.fromEntries(tags.map((t) => [str(t, 'Key') ?? '', str(t, 'Value') ?? ''])),
      propagated: Object.fromEntries(
        tags
          .filter((t) => str(t, 'PropagateAtLaunch') === 'true')
          .map((t) => [str(t, 'Key') ?? '', str(t, 'Value') ?? '']),
      ),
      createdAt: s.now(),
      activities: [],
    };
    checkCapacity(g);
    s.autoScalingGroups.set(name, g);
    reconcile(s, g);
    return {};
  },
  DescribeScalingActivities(s, p) {
    const g = getGroup(s, required(p, 'AutoScalingGroupName'));
    // A group whose launches fail keeps trying, as AWS does.
    reconcile(s, g);
    const max = num(p, 'MaxRecords') ?? 100;
    return {
      Activities: g.activities.slice(0, max).map((a) => ({
        ActivityId: a.id,
        AutoScalingGroupName: g.name,
        Description: a.description,
        Cause: a.cause,
        StartTime: new Date(a.at).toISOString(),
        EndTime: new Date(a.at).toISOString(),
        StatusCode: a.statusCode,
        StatusMessage: a.statusMessage,
        Progress: 100,
      })),
    };
  },
  DescribeAutoScalingGroups(s, p) {
    s.settle();
    const names = list<string>(p, 'AutoScalingGroupNames');
    let groups = [...s.autoScalingGroups.values()];
    if (names.length > 0) groups = groups.filter((g) => names.includes(g.name));
    groups = applyFilters(groups, p, () => undefined, 'Filters', 'Values');
    return { AutoScalingGroups: groups.map((g) => groupXml(s, g)) };
  },
  UpdateAutoScalingGroup(s, p) {
    const g = getGroup(s, required(p, 'AutoScalingGroupName'));
    const next = {
      ...g,
      minSize: num(p, 'MinSize') ?? g.minSize,
      maxSize: num(p, 'MaxSize') ?? g.maxSize,
      desired: num(p, 'DesiredCapacity') ?? g.desired,
    };
    checkCapacity(next);
    Object.assign(g, next);
    reconcile(s, g);
    return {};
  },
  /** CreateOrUpdateTags (Auto Scaling API reference): a changed PropagateAtLaunch tag applies to instances launched later. */
  CreateOrUpdateTags(s, p) {
    for (const t of list(p, 'Tags')) {
      const g = getGroup(s, required(t, 'ResourceId'));
      const key = required(t, 'Key');
      const value = str(t, 'Value') ?? '';
      g.tags[key] = value;
      if (str(t, 'PropagateAtLaunch') === 'true') g.propagated[key] = value;
      else delete g.propagated[key];
    }
    return {};
  },
  TerminateInstanceInAutoScalingGroup(s, p) {
    const id = required(p, 'InstanceId');
    const instance = s.instances.get(id);
    if (!instance?.groupName)
      throw new AwsFault('ValidationError', `Instance Id not found - No managed instance found for instance ID: ${id}`);
    const g = getGroup(s, instance.groupName);
    instance.terminatedAt ??= s.now();
    if (str(p, 'ShouldDecrementDesiredCapacity') === 'true') g.desired = Math.max(g.minSize, g.desired - 1);
    reconcile(s, g);
    return {
      Activity: {
        ActivityId: s.newId('act'),
        AutoScalingGroupName: g.name,
        Description: `Terminating EC2 instance: ${id}`,
        StatusCode: 'InProgress',
        Progress: 0,
      },
    };
  },
  DeleteAutoScalingGroup(s, p) {
    const g = getGroup(s, required(p, 'AutoScalingGroupName'));
    if (g.deletingAt !== undefined) return {};
    const live = members(s, g).filter((i) => i.terminatedAt === undefined);
    if (live.length > 0 && str(p, 'ForceDelete') !== 'true') {
      throw new AwsFault(
        'ResourceInUse',
        'You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group.',
      );
    }
    for (const i of live) i.terminatedAt = s.now();
    g.deletingAt = s.now();
    return {};
  },
};
