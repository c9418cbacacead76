/**
 * `terminate` on AWS: deletes exactly what the journal recorded, in reverse dependency order (a resource is
 * deleted only after everything that depends on it is gone; see delete-order.ts). Resources already gone count
 * as deleted.
 * With byTag, it then deletes whatever else in the region carries the cluster's constellation-uid tag.
 */
import {
  DeleteAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
  waitUntilGroupNotExists,
  type DescribeAutoScalingGroupsCommandOutput,
} from '@aws-sdk/client-auto-scaling';
import {
  DeleteInternetGatewayCommand,
  DeleteLaunchTemplateCommand,
  DeleteNatGatewayCommand,
  DeleteRouteCommand,
  DeleteRouteTableCommand,
  DeleteSecurityGroupCommand,
  DeleteSubnetCommand,
  DeleteVpcCommand,
  DescribeAddressesCommand,
  DescribeInstancesCommand,
  DescribeInternetGatewaysCommand,
  DescribeLaunchTemplatesCommand,
  DescribeNatGatewaysCommand,
  DescribeRouteTablesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  DetachInternetGatewayCommand,
  DisassociateRouteTableCommand,
  ReleaseAddressCommand,
  TerminateInstancesCommand,
  waitUntilInstanceTerminated,
  waitUntilNatGatewayDeleted,
  type DescribeAddressesCommandOutput,
  type DescribeInstancesCommandOutput,
  type DescribeInternetGatewaysCommandOutput,
  type DescribeLaunchTemplatesCommandOutput,
  type DescribeNatGatewaysCommandOutput,
  type DescribeRouteTablesCommandOutput,
  type DescribeSecurityGroupsCommandOutput,
  type DescribeSubnetsCommandOutput,
  type DescribeVpcsCommandOutput,
  type Filter,
} from '@aws-sdk/client-ec2';
import {
  DeleteListenerCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  waitUntilLoadBalancersDeleted,
  type DescribeLoadBalancersCommandOutput,
  type DescribeTagsCommandOutput,
  type DescribeTargetGroupsCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { UserError } from '../../lib/errors.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import type { AwsClients } from './clients.js';
import { deleteInReverseOrder } from './delete-order.js';
import { isNotFound } from './errors.js';
import type { AwsProviderOptions } from './options.js';
import { isInfrastructureResource, KIND, recordData, TAG, tagValue } from './resources.js';

export class AwsTerminate {
  constructor(
    private readonly ctx: ProviderContext,
    private readonly clients: AwsClients,
    private readonly options: AwsProviderOptions,
  ) {}

  async run(byTag: boolean): Promise<void> {
    const recorded = (await this.ctx.journal.list()).filter(isInfrastructureResource);
    const uid = this.options.uid ?? recorded.map((r) => recordData(r).uid).find((u) => u);
    const region = this.options.region ?? recorded.map((r) => recordData(r).region).find((r) => r);
    if (recorded.length > 0 || byTag) await this.clients.checkCredentials(region ?? 'us-east-1');
    await this.deleteAll(recorded, true);
    if (!byTag) {
      if (uid && region && recorded.length > 0) await this.confirmTerminated(region, uid);
      return;
    }
    if (!uid || !region) {
      throw new UserError('Cannot look for resources by tag: the workspace records no cluster uid or region.', {
        hint: 'Pass the cluster uid and region (from constellation-state.yaml) to the provider, or delete the resources tagged constellation-uid in the AWS console.',
      });
    }
    const leftovers = await this.discoverByTag(region, uid);
    if (leftovers.length > 0) {
      this.ctx.log.info('deleting resources found by tag', { uid, count: leftovers.length });
      await this.deleteAll(leftovers, false);
    }
    await this.confirmTerminated(region, uid);
  }

  /**
   * Terminate ends only when AWS confirms it: no instance of the cluster is left that is not terminated (an instance
   * a group launched while it was deleted, or one still shutting down, holds its volumes and bills), and no elastic
   * IP of the cluster is still allocated (they count against the region's quota of five).
   */
  private async confirmTerminated(region: string, uid: string): Promise<void> {
    const ec2 = this.clients.ec2(region);
    const tagFilter: Filter[] = [{ Name: `tag:${TAG.uid}`, Values: [uid] }];
    const out = await this.clients.send<DescribeInstancesCommandOutput>(
      ec2,
      new DescribeInstancesCommand({
        Filters: [
          ...tagFilter,
          { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] },
        ],
      }),
      'Checking that every instance is terminated',
    );
    const left = (out.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map((i) => i.InstanceId!));
    if (left.length > 0) {
      this.ctx.progress?.(`waiting for ${left.length} instance(s) to terminate`);
      await this.clients.wait(
        waitUntilInstanceTerminated,
        ec2,
        { InstanceIds: left },
        `Waiting for instances ${left.join(', ')} to terminate`,
      );
    }
    const addresses = await this.clients.send<DescribeAddressesCommandOutput>(
      ec2,
      new DescribeAddressesCommand({ Filters: tagFilter }),
      'Checking that every elastic IP is released',
    );
    const held = (addresses.Addresses ?? []).map((a) => a.AllocationId!);
    if (held.length > 0) {
      throw new UserError(`Terminate left elastic IPs of the cluster allocated: ${held.join(', ')}.`, {
        hint: "Run `constellation terminate` again; it looks for what carries the cluster's constellation-uid tag and releases it.",
      });
    }
  }

  private deleteAll(resources: RecordedResource[], fromJournal: boolean): Promise<void> {
    return deleteInReverseOrder(resources, {
      ctx: this.ctx,
      options: this.options,
      deleteOne: (r) => this.deleteOne(r),
      fromJournal,
      what: 'Terminating the AWS infrastructure',
    });
  }

  private async deleteOne(r: RecordedResource): Promise<void> {
    const region = recordData(r).region ?? this.options.region;
    if (!region) throw new UserError(`The journal entry ${r.id} (${r.kind}) names no region.`);
    const ec2 = this.clients.ec2(region);
    const elb = this.clients.elb(region);
    const asg = this.clients.autoscaling(region);
    const send = (client: Parameters<AwsClients['send']>[0], command: unknown) =>
      this.clients.send(client, command, `Deleting ${r.kind} ${r.id}`);
    const gone = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
        return false;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    };

    switch (r.kind) {
      case KIND.autoScalingGroup:
        if (
          await gone(() =>
            send(asg, new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: r.id, ForceDelete: true })),
          )
        )
          return;
        await this.clients.wait(
          waitUntilGroupNotExists,
          asg,
          { AutoScalingGroupNames: [r.id] },
          `Waiting for the auto scaling group ${r.id} to be deleted`,
        );
        return;
      case KIND.instance:
        if (await gone(() => send(ec2, new TerminateInstancesCommand({ InstanceIds: [r.id] })))) return;
        await this.clients.wait(
          waitUntilInstanceTerminated,
          ec2,
          { InstanceIds: [r.id] },
          `Waiting for instance ${r.id} to terminate`,
        );
        return;
      case KIND.loadBalancer:
        if (await gone(() => send(elb, new DeleteLoadBalancerCommand({ LoadBalancerArn: r.id })))) return;
        await this.clients.wait(
          waitUntilLoadBalancersDeleted,
          elb,
          { LoadBalancerArns: [r.id] },
          'Waiting for the load balancer to be deleted',
        );
        return;
      case KIND.listener:
        await gone(() => send(elb, new DeleteListenerCommand({ ListenerArn: r.id })));
        return;
      case KIND.targetGroup:
        await gone(() => send(elb, new DeleteTargetGroupCommand({ TargetGroupArn: r.id })));
        return;
      case KIND.launchTemplate:
        await gone(() => send(ec2, new DeleteLaunchTemplateCommand({ LaunchTemplateId: r.id })));
        return;
      case KIND.natGateway:
        if (await gone(() => send(ec2, new DeleteNatGatewayCommand({ NatGatewayId: r.id })))) return;
        await this.clients.wait(
          waitUntilNatGatewayDeleted,
          ec2,
          { NatGatewayIds: [r.id] },
          `Waiting for the NAT gateway ${r.id} to be deleted`,
        );
        return;
      case KIND.elasticIp:
        await gone(() => send(ec2, new ReleaseAddressCommand({ AllocationId: r.id })));
        return;
      case KIND.route: {
        const { routeTableId, destination } = recordData(r) as { routeTableId?: string; destination?: string };
        await gone(() =>
          send(ec2, new DeleteRouteCommand({ RouteTableId: routeTableId, DestinationCidrBlock: destination })),
        );
        return;
      }
      case KIND.routeTableAssociation:
        await gone(() => send(ec2, new DisassociateRouteTableCommand({ AssociationId: r.id })));
        return;
      case KIND.routeTable: {
        // Explicit associations the journal does not know (found by tag) must go first.
        const out = await this.describe<DescribeRouteTablesCommandOutput>(
          ec2,
          new DescribeRouteTablesCommand({ RouteTableIds: [r.id] }),
        );
        for (const a of out?.RouteTables?.[0]?.Associations ?? []) {
          if (!a.Main && a.RouteTableAssociationId)
            await gone(() =>
              send(ec2, new DisassociateRouteTableCommand({ AssociationId: a.RouteTableAssociationId })),
            );
        }
        if (out) await gone(() => send(ec2, new DeleteRouteTableCommand({ RouteTableId: r.id })));
        return;
      }
      case KIND.internetGatewayAttachment: {
        const { internetGatewayId, vpcId } = recordData(r) as { internetGatewayId?: string; vpcId?: string };
        await gone(() =>
          send(ec2, new DetachInternetGatewayCommand({ InternetGatewayId: internetGatewayId, VpcId: vpcId })),
        );
        return;
      }
      case KIND.internetGateway: {
        const out = await this.describe<DescribeInternetGatewaysCommandOutput>(
          ec2,
          new DescribeInternetGatewaysCommand({ InternetGatewayIds: [r.id] }),
        );
        for (const a of out?.InternetGateways?.[0]?.Attachments ?? []) {
          await gone(() => send(ec2, new DetachInternetGatewayCommand({ InternetGatewayId: r.id, VpcId: a.VpcId })));
        }
        if (out) await gone(() => send(ec2, new DeleteInternetGatewayCommand({ InternetGatewayId: r.id })));
        return;
      }
      case KIND.subnet:
        await gone(() => send(ec2, new DeleteSubnetCommand({ SubnetId: r.id })));
        return;
      case KIND.securityGroup:
        await gone(() => send(ec2, new DeleteSecurityGroupCommand({ GroupId: r.id })));
        return;
      case KIND.vpc:
        await gone(() => send(ec2, new DeleteVpcCommand({ VpcId: r.id })));
        return;
      default:
        throw new UserError(`The journal holds a resource of unknown kind ${r.kind} (${r.id}).`, {
          hint: 'It was not made by this version of the AWS provider; delete it by hand and remove it from constellation-resources.json.',
        });
    }
  }

  /** A describe whose subject may be gone already: undefined then. */
  private async describe<T>(client: Parameters<AwsClients['send']>[0], command: unknown): Promise<T | undefined> {
    try {
      return await this.clients.send<T>(client, command, 'Describing a resource');
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Everything in the region tagged with the cluster's uid, as journal-like entries whose dependsOn puts them
   * in waves: groups, instances and load balancers first, the VPC last.
   */
  private async discoverByTag(region: string, uid: string): Promise<RecordedResource[]> {
    const ec2 = this.clients.ec2(region);
    const elb = this.clients.elb(region);
    const tagFilter: Filter[] = [{ Name: `tag:${TAG.uid}`, Values: [uid] }];
    const send = <T>(client: Parameters<AwsClients['send']>[0], command: unknown) =>
      this.clients.send<T>(client, command, 'Looking for resources by tag');
    const entry = (kind: string, id: string | undefined, data: Record<string, unknown> = {}) =>
      id ? [{ kind, id, data: { region, uid, ...data } }] : [];

    const [groups, instances, lbArns, tgArns, templates, nats, addresses, tables, gateways, subnets, groupsSg, vpcs] =
      await Promise.all([
        send<DescribeAutoScalingGroupsCommandOutput>(
          this.clients.autoscaling(region),
          new DescribeAutoScalingGroupsCommand({ Filters: tagFilter }),
        ),
        send<DescribeInstancesCommandOutput>(
          ec2,
          new DescribeInstancesCommand({
            Filters: [
              ...tagFilter,
              { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] },
            ],
          }),
        ),
        this.taggedElbArns(elb, uid, 'load-balancer'),
        this.taggedElbArns(elb, uid, 'target-group'),
        send<DescribeLaunchTemplatesCommandOutput>(ec2, new DescribeLaunchTemplatesCommand({ Filters: tagFilter })),
        send<DescribeNatGatewaysCommandOutput>(
          ec2,
          new DescribeNatGatewaysCommand({
            Filter: [...tagFilter, { Name: 'state', Values: ['pending', 'available'] }],
          }),
        ),
        send<DescribeAddressesCommandOutput>(ec2, new DescribeAddressesCommand({ Filters: tagFilter })),
        send<DescribeRouteTablesCommandOutput>(ec2, new DescribeRouteTablesCommand({ Filters: tagFilter })),
        send<DescribeInternetGatewaysCommandOutput>(ec2, new DescribeInternetGatewaysCommand({ Filters: tagFilter })),
        send<DescribeSubnetsCommandOutput>(ec2, new DescribeSubnetsCommand({ Filters: tagFilter })),
        send<DescribeSecurityGroupsCommandOutput>(ec2, new DescribeSecurityGroupsCommand({ Filters: tagFilter })),
        send<DescribeVpcsCommandOutput>(ec2, new DescribeVpcsCommand({ Filters: tagFilter })),
      ]);

    const waves: RecordedResource[][] = [
      [
        ...(groups.AutoScalingGroups ?? []).flatMap((g) => entry(KIND.autoScalingGroup, g.AutoScalingGroupName)),
        ...(instances.Reservations ?? []).flatMap((res) =>
          (res.Instances ?? []).flatMap((i) => entry(KIND.instance, i.InstanceId)),
        ),
        ...lbArns.flatMap((arn) => entry(KIND.loadBalancer, arn)),
      ],
      [
        ...tgArns.flatMap((arn) => entry(KIND.targetGroup, arn)),
        ...(templates.LaunchTemplates ?? []).flatMap((t) => entry(KIND.launchTemplate, t.LaunchTemplateId)),
        ...(nats.NatGateways ?? []).flatMap((n) => entry(KIND.natGateway, n.NatGatewayId)),
      ],
      [
        ...(addresses.Addresses ?? []).flatMap((a) => entry(KIND.elasticIp, a.AllocationId)),
        ...(tables.RouteTables ?? []).flatMap((t) => entry(KIND.routeTable, t.RouteTableId)),
        ...(gateways.InternetGateways ?? []).flatMap((g) => entry(KIND.internetGateway, g.InternetGatewayId)),
      ],
      [
        ...(subnets.Subnets ?? []).flatMap((s) => entry(KIND.subnet, s.SubnetId)),
        ...(groupsSg.SecurityGroups ?? []).flatMap((g) => entry(KIND.securityGroup, g.GroupId)),
      ],
      (vpcs.Vpcs ?? []).flatMap((v) => entry(KIND.vpc, v.VpcId)),
    ];
    return waves.flatMap((wave, i) => {
      const later = waves
        .slice(i + 1)
        .flat()
        .map((r) => r.id);
      return wave.map((r) => ({ ...r, dependsOn: later }));
    });
  }

  /** Elastic Load Balancing cannot filter by tag: list all, then read their tags 20 at a time. */
  private async taggedElbArns(
    elb: Parameters<AwsClients['send']>[0],
    uid: string,
    type: 'load-balancer' | 'target-group',
  ): Promise<string[]> {
    const arns: string[] = [];
    let marker: string | undefined;
    do {
      if (type === 'load-balancer') {
        const out = await this.clients.send<DescribeLoadBalancersCommandOutput>(
          elb,
          new DescribeLoadBalancersCommand({ Marker: marker }),
          'Listing load balancers',
        );
        arns.push(...(out.LoadBalancers ?? []).flatMap((l) => (l.LoadBalancerArn ? [l.LoadBalancerArn] : [])));
        marker = out.NextMarker;
      } else {
        const out = await this.clients.send<DescribeTargetGroupsCommandOutput>(
          elb,
          new DescribeTargetGroupsCommand({ Marker: marker }),
          'Listing target groups',
        );
        arns.push(...(out.TargetGroups ?? []).flatMap((t) => (t.TargetGroupArn ? [t.TargetGroupArn] : [])));
        marker = out.NextMarker;
      }
    } while (marker);
    const tagged: string[] = [];
    for (let i = 0; i < arns.length; i += 20) {
      const out = await this.clients.send<DescribeTagsCommandOutput>(
        elb,
        new DescribeTagsCommand({ ResourceArns: arns.slice(i, i + 20) }),
        'Reading load balancer tags',
      );
      for (const d of out.TagDescriptions ?? []) {
        if (d.ResourceArn && tagValue(d.Tags, TAG.uid) === uid) tagged.push(d.ResourceArn);
      }
    }
    return tagged;
  }
}
