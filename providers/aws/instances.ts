/**
 * The cluster's instances on AWS: list and describe them (from the recorded auto scaling groups and EC2),
 * scale a node group (the group's desired capacity), and replace one instance for an upgrade (grow the group
 * by one, wait for the new instance to be in service, then terminate the old one and shrink the group back,
 * so the group never runs below its size).
 */
import {
  DescribeAutoScalingGroupsCommand,
  TerminateInstanceInAutoScalingGroupCommand,
  UpdateAutoScalingGroupCommand,
  type AutoScalingGroup,
  type DescribeAutoScalingGroupsCommandOutput,
} from '@aws-sdk/client-auto-scaling';
import { DescribeInstancesCommand, type DescribeInstancesCommandOutput, type Instance as Ec2Instance } from '@aws-sdk/client-ec2';
import { setTimeout as sleep } from 'node:timers/promises';
import { UserError } from '../../lib/errors.js';
import type { Instance, InstanceState, NodeRole, ProviderContext, RecordedResource } from '../contract.js';
import type { AwsClients } from './clients.js';
import { isNotFound } from './errors.js';
import type { AwsProviderOptions } from './options.js';
import { KIND, recordData, TAG, tagValue } from './resources.js';

const STATES: Record<string, InstanceState> = {
  pending: 'pending',
  running: 'running',
  stopping: 'stopped',
  stopped: 'stopped',
  'shutting-down': 'terminated',
  terminated: 'terminated',
};

export function toInstance(i: Ec2Instance): Instance {
  return {
    id: i.InstanceId ?? '',
    name: i.PrivateDnsName || i.InstanceId || '',
    role: (tagValue(i.Tags, TAG.role) as NodeRole | undefined) ?? 'worker',
    nodeGroup: tagValue(i.Tags, TAG.nodeGroup) ?? '',
    privateIp: i.PrivateIpAddress ?? '',
    publicIp: i.PublicIpAddress,
    state: STATES[i.State?.Name ?? ''] ?? 'unknown',
  };
}

export class AwsInstances {
  constructor(
    private readonly ctx: ProviderContext,
    private readonly clients: AwsClients,
    private readonly options: AwsProviderOptions,
  ) {}

  private async groups(): Promise<RecordedResource[]> {
    return (await this.ctx.journal.list()).filter((r) => r.kind === KIND.autoScalingGroup);
  }

  async list(): Promise<Instance[]> {
    const groups = await this.groups();
    const byRegion = new Map<string, string[]>();
    for (const g of groups) byRegion.set(recordData(g).region, [...(byRegion.get(recordData(g).region) ?? []), g.id]);
    const result: Instance[] = [];
    for (const [region, names] of byRegion) {
      const described = await this.describeGroups(region, names);
      const ids = described.flatMap((g) => (g.Instances ?? []).map((i) => i.InstanceId!));
      result.push(...(await this.describeInstances(region, ids)));
    }
    return result;
  }

  async describe(id: string): Promise<Instance> {
    const region = await this.regionOf();
    const [instance] = await this.describeInstances(region, [id]);
    if (!instance) {
      throw new UserError(`There is no instance ${id} in ${region}.`, { hint: 'List the cluster\'s instances with `constellation status`.' });
    }
    return instance;
  }

  async scale(nodeGroup: string, count: number): Promise<void> {
    if (!Number.isInteger(count) || count < 0) throw new UserError(`Cannot scale node group ${nodeGroup} to ${count} nodes: give a whole number >= 0.`);
    const record = await this.groupRecord(nodeGroup);
    const region = recordData(record).region;
    const [group] = await this.describeGroups(region, [record.id]);
    await this.clients.send(
      this.clients.autoscaling(region),
      new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: record.id, DesiredCapacity: count, MaxSize: Math.max(group?.MaxSize ?? 0, count) }),
      `Scaling node group ${nodeGroup}`,
    );
  }

  async replace(id: string): Promise<Instance> {
    const old = await this.describe(id);
    const record = await this.groupRecord(old.nodeGroup);
    const region = recordData(record).region;
    const asg = this.clients.autoscaling(region);
    const [group] = await this.describeGroups(region, [record.id]);
    if (!group) throw new UserError(`The auto scaling group ${record.id} of node group ${old.nodeGroup} does not exist.`);
    const before = new Set((group.Instances ?? []).map((i) => i.InstanceId));
    const desired = (group.DesiredCapacity ?? 0) + 1;
    this.ctx.progress?.(`starting a replacement for ${id}`);
    await this.clients.send(
      asg,
      new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: record.id, DesiredCapacity: desired, MaxSize: Math.max(group.MaxSize ?? 0, desired) }),
      `Growing node group ${old.nodeGroup}`,
    );
    const fresh = await this.waitForNewInstance(region, record.id, before);
    this.ctx.progress?.(`terminating ${id}`);
    await this.clients.send(
      asg,
      new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: id, ShouldDecrementDesiredCapacity: true }),
      `Terminating instance ${id}`,
    );
    return this.describe(fresh);
  }

  private async waitForNewInstance(region: string, groupName: string, before: Set<string | undefined>): Promise<string> {
    const deadline = Date.now() + (this.options.waiter?.maxWaitSeconds ?? 20 * 60) * 1000;
    for (;;) {
      const [group] = await this.describeGroups(region, [groupName]);
      const fresh = (group?.Instances ?? []).find((i) => !before.has(i.InstanceId) && i.LifecycleState === 'InService');
      if (fresh?.InstanceId) return fresh.InstanceId;
      if (Date.now() > deadline) throw new UserError(`No replacement instance came into service in ${groupName} in time.`);
      await sleep(this.options.pollIntervalMs ?? 10_000, undefined, { signal: this.ctx.signal });
    }
  }

  private async groupRecord(nodeGroup: string): Promise<RecordedResource> {
    const groups = await this.groups();
    const record = groups.find((g) => recordData(g).nodeGroup === nodeGroup);
    if (!record) {
      throw new UserError(`The cluster has no node group "${nodeGroup}".`, {
        hint: `Node groups: ${groups.map((g) => String(recordData(g).nodeGroup)).join(', ') || '(none recorded)'}.`,
      });
    }
    return record;
  }

  private async regionOf(): Promise<string> {
    const region = this.options.region ?? (await this.groups()).map((g) => recordData(g).region).find(Boolean);
    if (!region) throw new UserError('The workspace records no AWS resources: there is no cluster to ask about.');
    return region;
  }

  private async describeGroups(region: string, names: string[]): Promise<AutoScalingGroup[]> {
    if (names.length === 0) return [];
    const out = await this.clients.send<DescribeAutoScalingGroupsCommandOutput>(
      this.clients.autoscaling(region),
      new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: names }),
      'Describing the auto scaling groups',
    );
    return out.AutoScalingGroups ?? [];
  }

  private async describeInstances(region: string, ids: string[]): Promise<Instance[]> {
    if (ids.length === 0) return [];
    try {
      const out = await this.clients.send<DescribeInstancesCommandOutput>(
        this.clients.ec2(region),
        new DescribeInstancesCommand({ InstanceIds: ids }),
        'Describing instances',
      );
      return (out.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map(toInstance));
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
  }
}
