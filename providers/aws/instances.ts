/**
 * The cluster's instances on AWS, as the contract's scaling members (providers/contract.ts) need them:
 *
 *   list            the recorded auto scaling groups' instances, described by EC2 (LaunchTime is createdAt)
 *   scale (grow)    the group's desired capacity (apply's scale-out)
 *   add             the launch template gets a new version with the image new nodes boot ($Latest is what the
 *                   group launches), then desired capacity + 1, then the wait for exactly one new instance
 *                   InService (./capacity.ts: through transient launch failures)
 *   remove          TerminateInstanceInAutoScalingGroup of exactly that instance with
 *                   ShouldDecrementDesiredCapacity=true: the group starts no replacement and chooses no victim of
 *                   its own (lowering DesiredCapacity would let the termination policy pick one); then the wait
 *                   until EC2 reports it terminated
 *   drain           DeregisterTargets from every target group of its group, then DescribeTargetHealth until it is
 *                   no longer `draining` (the deregistration delay, which create sets, bounds it)
 *   markInitialized the init-secret hash tag becomes empty on the groups (PropagateAtLaunch), the launch templates'
 *                   instance tags and the running instances: a node launched later reads '' and never serves Init
 */
import {
  CreateOrUpdateTagsCommand,
  DescribeAutoScalingGroupsCommand,
  TerminateInstanceInAutoScalingGroupCommand,
  UpdateAutoScalingGroupCommand,
  type AutoScalingGroup,
  type DescribeAutoScalingGroupsCommandOutput,
} from '@aws-sdk/client-auto-scaling';
import {
  CreateLaunchTemplateVersionCommand,
  CreateTagsCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplateVersionsCommand,
  type DescribeInstancesCommandOutput,
  type DescribeLaunchTemplateVersionsCommandOutput,
  type Instance as Ec2Instance,
  type LaunchTemplateTagSpecificationRequest,
} from '@aws-sdk/client-ec2';
import {
  DeregisterTargetsCommand,
  DescribeTargetHealthCommand,
  type DescribeTargetHealthCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { pollUntil } from '../../lib/poll.js';
import { UserError } from '../../lib/errors.js';
import type { Instance, InstanceState, NodeRole, ProviderContext, RecordedResource } from '../contract.js';
import { waitForCapacity } from './capacity.js';
import type { AwsClients } from './clients.js';
import { awsErrorCode, isNotFound } from './errors.js';
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
    image: i.ImageId,
    createdAt: i.LaunchTime?.toISOString(),
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

  async scale(nodeGroup: string, count: number): Promise<void> {
    if (!Number.isInteger(count) || count < 0)
      throw new UserError(`Cannot scale node group ${nodeGroup} to ${count} nodes: give a whole number >= 0.`);
    const record = await this.groupRecord(nodeGroup);
    const region = recordData(record).region;
    const [group] = await this.describeGroups(region, [record.id]);
    await this.clients.send(
      this.clients.autoscaling(region),
      new UpdateAutoScalingGroupCommand({
        AutoScalingGroupName: record.id,
        DesiredCapacity: count,
        MaxSize: Math.max(group?.MaxSize ?? 0, count),
      }),
      `Scaling node group ${nodeGroup}`,
    );
  }

  async add(nodeGroup: string): Promise<Instance> {
    const record = await this.groupRecord(nodeGroup);
    const region = recordData(record).region;
    const [group] = await this.describeGroups(region, [record.id]);
    if (!group)
      throw new UserError(`The auto scaling group ${record.id} of node group ${nodeGroup} does not exist.`, {
        hint: 'Run `constellation status` to see the cluster as AWS has it.',
      });
    if (this.options.image) await this.newLaunchTemplateVersion(region, group, { image: this.options.image });
    const before = new Set((group.Instances ?? []).map((i) => i.InstanceId));
    const desired = (group.DesiredCapacity ?? 0) + 1;
    this.ctx.progress?.(`adding an instance to node group ${nodeGroup}`);
    await this.clients.send(
      this.clients.autoscaling(region),
      new UpdateAutoScalingGroupCommand({
        AutoScalingGroupName: record.id,
        DesiredCapacity: desired,
        MaxSize: Math.max(group.MaxSize ?? 0, desired),
      }),
      `Growing node group ${nodeGroup}`,
    );
    const zone = String(recordData(record).zone ?? '');
    await waitForCapacity(
      this.clients,
      region,
      {
        groupName: record.id,
        nodeGroup,
        desired,
        instanceType: group.Instances?.[0]?.InstanceType ?? "the group's",
        zone,
      },
      this.ctx,
      this.options,
    );
    const [after] = await this.describeGroups(region, [record.id]);
    const fresh = (after?.Instances ?? []).find((i) => !before.has(i.InstanceId) && i.LifecycleState === 'InService');
    if (!fresh?.InstanceId)
      throw new UserError(`Node group ${nodeGroup} reached ${desired} instances, but none of them is new.`, {
        hint: 'Run the command again: it adds one more instance.',
      });
    // EC2 is eventually consistent: Auto Scaling may report the instance before DescribeInstances knows it.
    let instance: Instance | undefined;
    await this.until(`EC2 to describe the new instance ${fresh.InstanceId}`, async () => {
      [instance] = await this.describeInstances(region, [fresh.InstanceId!]);
      return instance !== undefined;
    });
    return instance!;
  }

  async remove(id: string): Promise<void> {
    const region = await this.regionOf();
    this.ctx.progress?.(`terminating ${id}`);
    try {
      await this.clients.send(
        this.clients.autoscaling(region),
        new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: id, ShouldDecrementDesiredCapacity: true }),
        `Terminating instance ${id}`,
      );
    } catch (err) {
      // Gone already (a repeated call): Auto Scaling no longer manages it, or EC2 no longer knows it.
      if (!isNotFound(err) && !/No managed instance found/i.test((err as Error).message)) throw err;
    }
    // Until EC2 says `terminated` (not just `shutting-down`, which the listing already counts as gone).
    await this.until(`instance ${id} to terminate`, async () => {
      const out = await this.clients.send<DescribeInstancesCommandOutput>(
        this.clients.ec2(region),
        new DescribeInstancesCommand({ Filters: [{ Name: 'instance-id', Values: [id] }] }),
        'Describing instances',
      );
      const state = out.Reservations?.flatMap((r) => r.Instances ?? []).find((i) => i.InstanceId === id)?.State?.Name;
      return state === undefined || state === 'terminated';
    });
  }

  async drain(id: string): Promise<void> {
    const region = await this.regionOf();
    const groups = await this.describeGroups(
      region,
      (await this.groups()).map((g) => g.id),
    );
    const group = groups.find((g) => (g.Instances ?? []).some((i) => i.InstanceId === id));
    const targetGroups = group?.TargetGroupARNs ?? [];
    if (targetGroups.length === 0) return; // a worker, or not in a group any more: nothing sends it traffic
    const elb = this.clients.elb(region);
    this.ctx.progress?.(`draining ${id} from the load balancer`);
    for (const arn of targetGroups) {
      await this.clients.send(
        elb,
        new DeregisterTargetsCommand({ TargetGroupArn: arn, Targets: [{ Id: id }] }),
        `Deregistering ${id} from the load balancer`,
      );
    }
    await this.until(`instance ${id} to drain from the load balancer`, async () => {
      for (const arn of targetGroups) {
        const out = await this.clients.send<DescribeTargetHealthCommandOutput>(
          elb,
          new DescribeTargetHealthCommand({ TargetGroupArn: arn }),
          "Reading the load balancer's targets",
        );
        if (
          (out.TargetHealthDescriptions ?? []).some((t) => t.Target?.Id === id && t.TargetHealth?.State === 'draining')
        )
          return false;
      }
      return true;
    });
  }

  async markInitialized(): Promise<void> {
    const records = await this.groups();
    const byRegion = new Map<string, string[]>();
    for (const g of records) byRegion.set(recordData(g).region, [...(byRegion.get(recordData(g).region) ?? []), g.id]);
    for (const [region, names] of byRegion) {
      const groups = await this.describeGroups(region, names);
      for (const group of groups) {
        if ((group.Tags ?? []).some((t) => t.Key === TAG.initSecretHash && t.Value === '')) continue;
        await this.clients.send(
          this.clients.autoscaling(region),
          new CreateOrUpdateTagsCommand({
            Tags: [
              {
                ResourceId: group.AutoScalingGroupName,
                ResourceType: 'auto-scaling-group',
                Key: TAG.initSecretHash,
                Value: '',
                PropagateAtLaunch: true,
              },
            ],
          }),
          `Marking node group ${group.AutoScalingGroupName} initialized`,
        );
        await this.newLaunchTemplateVersion(region, group, { initialized: true });
      }
      const ids = groups.flatMap((g) => (g.Instances ?? []).map((i) => i.InstanceId!));
      if (ids.length > 0) {
        await this.clients.send(
          this.clients.ec2(region),
          new CreateTagsCommand({ Resources: ids, Tags: [{ Key: TAG.initSecretHash, Value: '' }] }),
          'Marking the instances initialized',
        );
      }
    }
  }

  /**
   * A new version of the group's launch template from its latest one (the group launches $Latest): another image,
   * and/or the init-secret hash tag emptied. Nothing is made when the latest version has both already.
   */
  private async newLaunchTemplateVersion(
    region: string,
    group: AutoScalingGroup,
    change: { image?: string; initialized?: boolean },
  ): Promise<void> {
    const templateId = group.LaunchTemplate?.LaunchTemplateId;
    if (!templateId) return;
    const ec2 = this.clients.ec2(region);
    const out = await this.clients.send<DescribeLaunchTemplateVersionsCommandOutput>(
      ec2,
      new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: templateId, Versions: ['$Latest'] }),
      'Reading the launch template',
    );
    const data = out.LaunchTemplateVersions?.[0]?.LaunchTemplateData ?? {};
    const specs = (data.TagSpecifications ?? []) as LaunchTemplateTagSpecificationRequest[];
    const hashSet = specs.some((spec) => (spec.Tags ?? []).some((t) => t.Key === TAG.initSecretHash && t.Value !== ''));
    const newImage = change.image !== undefined && data.ImageId !== change.image;
    const emptyHash = change.initialized === true && hashSet;
    if (!newImage && !emptyHash) return;
    await this.clients.send(
      ec2,
      new CreateLaunchTemplateVersionCommand({
        LaunchTemplateId: templateId,
        SourceVersion: '$Latest',
        VersionDescription: newImage ? `image ${change.image}` : 'cluster initialized',
        LaunchTemplateData: {
          ...(newImage ? { ImageId: change.image } : {}),
          ...(emptyHash
            ? {
                TagSpecifications: specs.map((spec) => ({
                  ...spec,
                  Tags: (spec.Tags ?? []).map((t) => (t.Key === TAG.initSecretHash ? { Key: t.Key, Value: '' } : t)),
                })),
              }
            : {}),
        },
      }),
      `Updating the launch template of ${group.AutoScalingGroupName}`,
    );
  }

  /** Polls `done` until it holds; bounded by the waiter's maximum (default 20 minutes). */
  private async until(what: string, done: () => Promise<boolean>): Promise<void> {
    const maxPollMs = this.options.pollIntervalMs ?? 5000;
    const firstPollMs = Math.min(1000, maxPollMs);
    await pollUntil(async () => ((await done()) ? true : undefined), {
      timeoutMs: (this.options.waiter?.maxWaitSeconds ?? 20 * 60) * 1000,
      intervalMs: (attempt) => Math.min(firstPollMs * 2 ** (attempt - 1), maxPollMs),
      clock: this.options.clock,
      sleep: this.options.sleep,
      signal: this.ctx.signal,
      onTimeout: () => {
        throw new UserError(`Timed out waiting for ${what}.`, { hint: 'Run the command again to keep waiting.' });
      },
    });
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
        // By filter, not InstanceIds: one instance EC2 does not know yet (eventual consistency) fails an InstanceIds
        // call as a whole, while a filter leaves it out.
        new DescribeInstancesCommand({ Filters: [{ Name: 'instance-id', Values: ids }] }),
        'Describing instances',
      );
      return (out.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map(toInstance));
    } catch (err) {
      if (isNotFound(err) || awsErrorCode(err) === 'InvalidInstanceID.NotFound') return [];
      throw err;
    }
  }
}
