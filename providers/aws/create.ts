/**
 * `create` on AWS: executes the plan of ./plan.ts (network, security group, network load balancer, per node
 * group a launch template and an auto scaling group, then waiting until each group runs its desired capacity,
 * ./capacity.ts) with the SDK. Independent steps run concurrently, in the
 * plan's dependency order (providers/common/task-graph.ts). Every resource is written to the journal as soon as
 * AWS accepted it (before waiting for it to become available), so a re-run after an interruption skips what
 * exists and continues; a resource an interrupted run made but could not record is found again (by name, client
 * token or tag) instead of made twice. A failed run throws CreateFailedError, after which `terminate` rolls back
 * exactly what was recorded.
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
  DescribeAccountAttributesCommand,
  DescribeAddressesCommand,
  type DescribeAccountAttributesCommandOutput,
  type DescribeAddressesCommandOutput,
} from '@aws-sdk/client-ec2';
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  ModifyLoadBalancerAttributesCommand,
  ModifyTargetGroupAttributesCommand,
  waitUntilLoadBalancerAvailable,
  type CreateListenerCommandOutput,
  type CreateLoadBalancerCommandOutput,
  type CreateTargetGroupCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, CreateResult, ProviderContext, RecordedResource } from '../contract.js';
import { runTaskGraph, TaskGraphError, type Task } from '../common/task-graph.js';
import { waitForCapacity } from './capacity.js';
import type { AwsClients } from './clients.js';
import { checkImage } from './confidential.js';
import { awsErrorCode, CreateFailedError, isDuplicate, isEventuallyConsistent, toUserError } from './errors.js';
import { pollUntil } from '../../lib/poll.js';
import type { AwsProviderOptions } from './options.js';
import { planCreate, STEP, type AwsPlan, type AwsStep, type ResourceStep } from './plan.js';
import { isInfrastructureResource, recordData, TAG, VPC_CIDR } from './resources.js';

interface Made {
  id: string;
  data?: Record<string, unknown>;
}

export class AwsCreate {
  private readonly made = new Map<string, RecordedResource>();
  private readonly plan: AwsPlan;

  constructor(
    private readonly request: CreateRequest,
    private readonly ctx: ProviderContext,
    private readonly clients: AwsClients,
    private readonly options: AwsProviderOptions,
  ) {
    this.plan = planCreate(request);
  }

  async run(): Promise<CreateResult> {
    await this.loadJournal();
    await this.clients.checkCredentials(this.plan.config.region);
    await this.checkAddressQuota();
    const tasks: Task[] = this.plan.steps.map((step) => ({
      id: step.id,
      deps: step.deps,
      run: () => this.execute(step),
    }));
    this.options.onPlan?.(this.plan.steps.map((s) => ({ id: s.id, deps: [...s.deps] })));
    try {
      await runTaskGraph(tasks, {
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

  /** The id of what a step made; the plan's order guarantees it exists. */
  private readonly id = (step: string): string => {
    const r = this.made.get(step);
    if (!r) throw new Error(`step order bug: ${step} is needed but was not made`);
    return r.id;
  };

  private data(step: string): Record<string, unknown> {
    return this.made.get(step)?.data ?? {};
  }

  private get ec2() {
    return this.clients.ec2(this.plan.config.region);
  }

  private get elb() {
    return this.clients.elb(this.plan.config.region);
  }

  /**
   * Sends one command of the plan. A `*.NotFound` for a resource made moments ago (EC2 eventual consistency: "Eventual
   * consistency in the Amazon EC2 API", e.g. InvalidGroup.NotFound right after CreateSecurityGroup, or Auto Scaling
   * not finding a new launch template) is retried with backoff, for at most options.consistencyTimeoutMs (default 2
   * minutes); every other error ends the step at once.
   */
  private async send<T>(client: Parameters<AwsClients['send']>[0], command: unknown, action: string): Promise<T> {
    const firstDelayMs = Math.max(1, this.options.retryDelayMs ?? 500);
    let notFound: unknown;
    return pollUntil<T>(
      async (attempt) => {
        try {
          // A fresh command per attempt: an SDK command object is not sent twice.
          const fresh =
            attempt === 1
              ? command
              : new (command as { constructor: new (input: unknown) => unknown }).constructor(
                  (command as { input: unknown }).input,
                );
          return await this.clients.send<T>(client, fresh, action);
        } catch (err) {
          if (!isEventuallyConsistent(err)) throw err;
          this.ctx.log.debug('aws: not found yet, retrying', { action, code: awsErrorCode(err) });
          notFound = err;
          return undefined;
        }
      },
      {
        timeoutMs: this.options.consistencyTimeoutMs ?? 120_000,
        intervalMs: (attempt) => Math.min(firstDelayMs * 2 ** (attempt - 1), 10_000),
        clock: this.options.clock,
        sleep: this.options.sleep,
        signal: this.ctx.signal,
        onTimeout: () => {
          throw notFound;
        },
      },
    );
  }

  /**
   * Refuses, before anything is made, a create whose elastic IPs would exceed the region's quota (AllocateAddress
   * would fail with AddressLimitExceeded half-way): one per zone and one for the load balancer, minus those an
   * interrupted run made already, against DescribeAccountAttributes' vpc-max-elastic-ips and the addresses in use.
   */
  private async checkAddressQuota(): Promise<void> {
    const missing = this.plan.elasticIpSteps.filter((step) => !this.made.has(step));
    if (missing.length === 0) return;
    const [attributes, addresses] = await Promise.all([
      this.clients.send<DescribeAccountAttributesCommandOutput>(
        this.ec2,
        new DescribeAccountAttributesCommand({}),
        'Reading the elastic IP quota',
      ),
      this.clients.send<DescribeAddressesCommandOutput>(
        this.ec2,
        new DescribeAddressesCommand({}),
        'Counting the elastic IPs in use',
      ),
    ]);
    const quota = Number(
      attributes.AccountAttributes?.find((a) => a.AttributeName === 'vpc-max-elastic-ips')?.AttributeValues?.[0]
        ?.AttributeValue ?? NaN,
    );
    const inUse = (addresses.Addresses ?? []).length;
    if (Number.isFinite(quota) && inUse + missing.length > quota) {
      throw new UserError(
        `The cluster needs ${missing.length} more elastic IPs in ${this.plan.config.region} (one per zone for its NAT gateways: ${this.plan.zones.join(', ')}; one for the load balancer), but ${inUse} of the quota of ${quota} are in use.`,
        {
          hint: 'Release unused elastic IPs, request a higher "EC2-VPC Elastic IPs" quota (Service Quotas), or put the node groups in fewer zones. Nothing was created.',
        },
      );
    }
  }

  /** Sends a command whose refusal `done` (an error code or test) means an interrupted run already did it. */
  private async sendUnlessDone(
    client: Parameters<AwsClients['send']>[0],
    command: unknown,
    action: string,
    done: string | ((err: unknown) => boolean),
  ): Promise<void> {
    try {
      await this.send(client, command, action);
    } catch (err) {
      if (!(typeof done === 'string' ? awsErrorCode(err) === done : done(err))) throw err;
    }
  }

  private async execute(step: AwsStep): Promise<void> {
    switch (step.kind) {
      case 'check-image':
        return this.checkImage(step.imageId);
      case 'wait-load-balancer':
        await this.clients.wait(
          waitUntilLoadBalancerAvailable,
          this.elb,
          { LoadBalancerArns: [this.id(step.loadBalancer)] },
          'Waiting for the load balancer',
        );
        return;
      case 'load-balancer-attributes':
        await this.send(this.elb, new ModifyLoadBalancerAttributesCommand(step.input(this.id)), step.action);
        return;
      case 'target-group-attributes':
        await this.send(this.elb, new ModifyTargetGroupAttributesCommand(step.input(this.id)), step.action);
        return;
      case 'wait-capacity':
        return waitForCapacity(this.clients, this.plan.config.region, step.target(this.id), this.ctx, this.options);
      case 'security-group-rules':
        return this.sendUnlessDone(
          this.ec2,
          new AuthorizeSecurityGroupIngressCommand(step.input(this.id)),
          step.action,
          'InvalidPermission.Duplicate',
        );
      default: {
        const id = await this.ensure(step);
        if (step.kind === 'aws:nat-gateway') await this.waitForNatGateway(id, String(step.data?.zone));
      }
    }
  }

  /** Makes a step's resource unless the journal has it; records it the moment AWS accepted it. */
  private async ensure(step: ResourceStep): Promise<string> {
    const existing = this.made.get(step.id);
    if (existing) return existing.id;
    this.ctx.progress?.(`creating ${step.id}`);
    const made = await this.make(step);
    const record: RecordedResource = {
      kind: step.kind,
      id: made.id,
      name: step.id,
      dependsOn: step.dependsOn.map(this.id),
      data: { region: this.plan.config.region, uid: this.request.uid, ...step.data, ...made.data },
    };
    await this.ctx.journal.record(record);
    this.made.set(step.id, record);
    return made.id;
  }

  /**
   * The SDK call of a resource step. Where an interrupted run may have made the resource without recording it,
   * the conflict AWS answers with leads to the existing resource (same name, client token or cluster tag).
   */
  private async make(step: ResourceStep): Promise<Made> {
    switch (step.kind) {
      case 'aws:vpc': {
        const out = await this.send<CreateVpcCommandOutput>(
          this.ec2,
          new CreateVpcCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.Vpc!.VpcId! };
      }
      case 'aws:internet-gateway': {
        const out = await this.send<CreateInternetGatewayCommandOutput>(
          this.ec2,
          new CreateInternetGatewayCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.InternetGateway!.InternetGatewayId! };
      }
      case 'aws:internet-gateway-attachment': {
        const input = step.input(this.id);
        await this.sendUnlessDone(
          this.ec2,
          new AttachInternetGatewayCommand(input),
          step.action,
          'Resource.AlreadyAssociated',
        );
        return {
          id: `${input.InternetGatewayId}|${input.VpcId}`,
          data: { internetGatewayId: input.InternetGatewayId, vpcId: input.VpcId },
        };
      }
      case 'aws:subnet':
        return { id: await this.subnet(step) };
      case 'aws:elastic-ip': {
        const out = await this.send<AllocateAddressCommandOutput>(
          this.ec2,
          new AllocateAddressCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.AllocationId!, data: { publicIp: out.PublicIp } };
      }
      case 'aws:nat-gateway': {
        const out = await this.send<CreateNatGatewayCommandOutput>(
          this.ec2,
          new CreateNatGatewayCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.NatGateway!.NatGatewayId! };
      }
      case 'aws:route-table': {
        const out = await this.send<CreateRouteTableCommandOutput>(
          this.ec2,
          new CreateRouteTableCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.RouteTable!.RouteTableId! };
      }
      case 'aws:route': {
        const input = step.input(this.id);
        await this.sendUnlessDone(this.ec2, new CreateRouteCommand(input), step.action, 'RouteAlreadyExists');
        return {
          id: `${input.RouteTableId}|${input.DestinationCidrBlock}`,
          data: { routeTableId: input.RouteTableId, destination: input.DestinationCidrBlock },
        };
      }
      case 'aws:route-table-association':
        return { id: await this.association(step) };
      case 'aws:security-group':
        return { id: await this.securityGroup(step) };
      case 'aws:load-balancer': {
        const out = await this.send<CreateLoadBalancerCommandOutput>(
          this.elb,
          new CreateLoadBalancerCommand(step.input(this.id)),
          step.action,
        );
        const lb = out.LoadBalancers![0];
        return { id: lb.LoadBalancerArn!, data: { dnsName: lb.DNSName } };
      }
      case 'aws:target-group': {
        const out = await this.send<CreateTargetGroupCommandOutput>(
          this.elb,
          new CreateTargetGroupCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.TargetGroups![0].TargetGroupArn! };
      }
      case 'aws:listener': {
        const out = await this.send<CreateListenerCommandOutput>(
          this.elb,
          new CreateListenerCommand(step.input(this.id)),
          step.action,
        );
        return { id: out.Listeners![0].ListenerArn! };
      }
      case 'aws:launch-template':
        return { id: await this.launchTemplate(step) };
      case 'aws:autoscaling-group': {
        const input = step.input(this.id);
        // A duplicate was made by the interrupted run: the name carries the cluster's uid, so it is ours.
        await this.sendUnlessDone(
          this.clients.autoscaling(this.plan.config.region),
          new CreateAutoScalingGroupCommand(input),
          step.action,
          isDuplicate,
        );
        return { id: input.AutoScalingGroupName! };
      }
    }
  }

  private async checkImage(imageId: string): Promise<void> {
    let images: DescribeImagesCommandOutput['Images'];
    try {
      const out = await this.send<DescribeImagesCommandOutput>(
        this.ec2,
        new DescribeImagesCommand({ ImageIds: [imageId] }),
        'Looking up the image',
      );
      images = out.Images;
    } catch (err) {
      if (!/^InvalidAMIID\./.test(awsErrorCode(err))) throw err;
    }
    checkImage(imageId, images?.[0]);
  }

  private async subnet(step: Extract<ResourceStep, { kind: 'aws:subnet' }>): Promise<string> {
    const input = step.input(this.id);
    try {
      const out = await this.send<CreateSubnetCommandOutput>(this.ec2, new CreateSubnetCommand(input), step.action);
      return out.Subnet!.SubnetId!;
    } catch (err) {
      // Created by the interrupted run, before it could record it: adopt it if it carries our uid.
      if (awsErrorCode(err) !== 'InvalidSubnet.Conflict') throw err;
      const out = await this.send<DescribeSubnetsCommandOutput>(
        this.ec2,
        new DescribeSubnetsCommand({
          Filters: [
            { Name: 'vpc-id', Values: [input.VpcId!] },
            { Name: 'cidr-block', Values: [input.CidrBlock!] },
            { Name: `tag:${TAG.uid}`, Values: [this.request.uid] },
          ],
        }),
        'Describing the subnets',
      );
      const id = out.Subnets?.[0]?.SubnetId;
      if (!id) throw err;
      return id;
    }
  }

  private async waitForNatGateway(id: string, zone: string): Promise<void> {
    try {
      await this.clients.wait(
        waitUntilNatGatewayAvailable,
        this.ec2,
        { NatGatewayIds: [id] },
        `Waiting for the NAT gateway ${id}`,
      );
    } catch (err) {
      const out = await this.send<DescribeNatGatewaysCommandOutput>(
        this.ec2,
        new DescribeNatGatewaysCommand({ NatGatewayIds: [id] }),
        'Describing the NAT gateway',
      );
      const gw = out.NatGateways?.[0];
      if (gw?.State === 'failed') {
        throw new UserError(
          `The NAT gateway ${id} in ${zone} failed: ${gw.FailureCode ?? ''} ${gw.FailureMessage ?? ''}`.trim(),
          { cause: err },
        );
      }
      throw err;
    }
  }

  private async association(step: Extract<ResourceStep, { kind: 'aws:route-table-association' }>): Promise<string> {
    const input = step.input(this.id);
    try {
      const out = await this.send<AssociateRouteTableCommandOutput>(
        this.ec2,
        new AssociateRouteTableCommand(input),
        step.action,
      );
      return out.AssociationId!;
    } catch (err) {
      if (awsErrorCode(err) !== 'Resource.AlreadyAssociated') throw err;
      const out = await this.send<DescribeRouteTablesCommandOutput>(
        this.ec2,
        new DescribeRouteTablesCommand({ RouteTableIds: [input.RouteTableId!] }),
        'Describing a route table',
      );
      const assoc = out.RouteTables?.[0]?.Associations?.find((a) => a.SubnetId === input.SubnetId);
      if (!assoc?.RouteTableAssociationId) throw err;
      return assoc.RouteTableAssociationId;
    }
  }

  private async securityGroup(step: Extract<ResourceStep, { kind: 'aws:security-group' }>): Promise<string> {
    const input = step.input(this.id);
    try {
      const out = await this.send<CreateSecurityGroupCommandOutput>(
        this.ec2,
        new CreateSecurityGroupCommand(input),
        step.action,
      );
      return out.GroupId!;
    } catch (err) {
      if (!isDuplicate(err)) throw err;
      const out = await this.send<DescribeSecurityGroupsCommandOutput>(
        this.ec2,
        new DescribeSecurityGroupsCommand({
          Filters: [
            { Name: 'vpc-id', Values: [input.VpcId!] },
            { Name: 'group-name', Values: [input.GroupName!] },
          ],
        }),
        'Describing the security group',
      );
      const id = out.SecurityGroups?.[0]?.GroupId;
      if (!id) throw err;
      return id;
    }
  }

  private async launchTemplate(step: Extract<ResourceStep, { kind: 'aws:launch-template' }>): Promise<string> {
    const input = step.input(this.id);
    try {
      const out = await this.send<CreateLaunchTemplateCommandOutput>(
        this.ec2,
        new CreateLaunchTemplateCommand(input),
        step.action,
      );
      return out.LaunchTemplate!.LaunchTemplateId!;
    } catch (err) {
      if (!isDuplicate(err)) throw err;
      const out = await this.send<DescribeLaunchTemplatesCommandOutput>(
        this.ec2,
        new DescribeLaunchTemplatesCommand({ LaunchTemplateNames: [input.LaunchTemplateName!] }),
        'Describing the launch template',
      );
      const id = out.LaunchTemplates?.[0]?.LaunchTemplateId;
      if (!id) throw err;
      return id;
    }
  }

  private result(): CreateResult {
    const { config } = this.plan;
    const publicIp = this.data(STEP.loadBalancerIp).publicIp as string;
    const dnsName = this.data(STEP.loadBalancer).dnsName as string;
    const groups = Object.fromEntries(
      this.request.nodeGroups.map((g) => [g.name, this.id(STEP.autoScalingGroup(g.name))]),
    );
    return {
      clusterEndpoint: publicIp,
      inClusterEndpoint: dnsName,
      apiServerCertSANs: [publicIp, dnsName],
      ipCidrNode: VPC_CIDR,
      providerState: {
        region: config.region,
        zone: config.zone,
        vpcId: this.id(STEP.vpc),
        securityGroupId: this.id(STEP.securityGroup),
        loadBalancerArn: this.id(STEP.loadBalancer),
        loadBalancerDnsName: dnsName,
        autoScalingGroups: groups,
      },
    };
  }
}
