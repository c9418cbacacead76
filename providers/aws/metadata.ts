/**
 * Node side on AWS (NodeMetadata): who am I (instance metadata service, then EC2 for my tags), who are my
 * peers (instances with my constellation-uid tag), where is the control plane's load balancer (the load
 * balancer with my uid tag), the init secret's bcrypt hash (my constellation-init-secret-hash tag) and the cluster's
 * join-service key (my constellation-join-service-key tag).
 * The node's instance profile grants ec2:DescribeInstances and elasticloadbalancing:Describe* (see iam.ts).
 */
import {
  DescribeInstancesCommand,
  type DescribeInstancesCommandOutput,
  type Instance as Ec2Instance,
} from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  type DescribeLoadBalancersCommandOutput,
  type DescribeTagsCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { InstanceMetadata, NodeMetadata, NodeRole } from '../contract.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { AwsClients } from './clients.js';
import { awsErrorCode } from './errors.js';

/** How often a node asks EC2 for itself while EC2 does not know it yet (about a minute in all). */
const SELF_NOT_FOUND_ATTEMPTS = 12;
import { ImdsClient } from './imds.js';
import type { AwsProviderOptions } from './options.js';
import { TAG, tagValue } from './resources.js';

function toMetadata(i: Ec2Instance): InstanceMetadata {
  return {
    name: i.PrivateDnsName || i.InstanceId || '',
    providerId: `aws:///${i.Placement?.AvailabilityZone ?? ''}/${i.InstanceId ?? ''}`,
    role: (tagValue(i.Tags, TAG.role) as NodeRole | undefined) ?? 'worker',
    vpcIp: i.PrivateIpAddress ?? '',
  };
}

export class AwsNodeMetadata implements NodeMetadata {
  private readonly imds: ImdsClient;
  private readonly clients: AwsClients;
  private selfInstance?: Promise<{ region: string; instance: Ec2Instance }>;

  constructor(private readonly options: AwsProviderOptions = {}) {
    this.imds = new ImdsClient(options.imdsEndpoint);
    this.clients = new AwsClients(options);
  }

  async self(): Promise<InstanceMetadata> {
    return toMetadata((await this.me()).instance);
  }

  async peers(): Promise<InstanceMetadata[]> {
    const { region, uid } = await this.cluster();
    const out = await this.clients.send<DescribeInstancesCommandOutput>(
      this.clients.ec2(region),
      new DescribeInstancesCommand({
        Filters: [
          { Name: `tag:${TAG.uid}`, Values: [uid] },
          { Name: 'instance-state-name', Values: ['running'] },
        ],
      }),
      "Listing the cluster's instances",
    );
    return (out.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map(toMetadata));
  }

  async loadBalancerEndpoint(): Promise<string> {
    const { region, uid } = await this.cluster();
    const elb = this.clients.elb(region);
    let marker: string | undefined;
    do {
      const page = await this.clients.send<DescribeLoadBalancersCommandOutput>(
        elb,
        new DescribeLoadBalancersCommand({ Marker: marker }),
        'Listing load balancers',
      );
      const lbs = page.LoadBalancers ?? [];
      for (let i = 0; i < lbs.length; i += 20) {
        const batch = lbs.slice(i, i + 20);
        const tags = await this.clients.send<DescribeTagsCommandOutput>(
          elb,
          new DescribeTagsCommand({ ResourceArns: batch.map((l) => l.LoadBalancerArn!) }),
          'Reading load balancer tags',
        );
        const mine = tags.TagDescriptions?.find((d) => tagValue(d.Tags, TAG.uid) === uid);
        const lb = mine && batch.find((l) => l.LoadBalancerArn === mine.ResourceArn);
        if (lb?.DNSName) return lb.DNSName;
      }
      marker = page.NextMarker;
    } while (marker);
    throw new Error(`no load balancer tagged ${TAG.uid}=${uid} in ${region}`);
  }

  /** '' once the cluster is initialized: markInitialized empties the tag (providers/aws/instances.ts). */
  async initSecretHash(): Promise<string> {
    const hash = tagValue((await this.me()).instance.Tags, TAG.initSecretHash);
    if (hash === undefined) throw new Error(`instance has no ${TAG.initSecretHash} tag`);
    return hash;
  }

  async joinServiceKey(): Promise<string> {
    const key = tagValue((await this.me()).instance.Tags, TAG.joinServiceKey);
    if (!key) throw new Error(`instance has no ${TAG.joinServiceKey} tag`);
    return key;
  }

  /** The constellation-uid tag of this instance: the cluster it belongs to. */
  async clusterUid(): Promise<string> {
    return (await this.cluster()).uid;
  }

  private async cluster(): Promise<{ region: string; uid: string }> {
    const { region, instance } = await this.me();
    const uid = tagValue(instance.Tags, TAG.uid);
    if (!uid) throw new Error(`instance ${instance.InstanceId} has no ${TAG.uid} tag`);
    return { region, uid };
  }

  /** The instance this code runs on, described once (a failed attempt is not cached). */
  private me(): Promise<{ region: string; instance: Ec2Instance }> {
    this.selfInstance ??= (async () => {
      const [id, imdsRegion] = await Promise.all([
        this.imds.metadata('instance-id'),
        this.imds.metadata('placement/region'),
      ]);
      const region = this.options.region ?? imdsRegion;
      // EC2 is eventually consistent: right after launch, DescribeInstances may not know the instance yet.
      let out: DescribeInstancesCommandOutput | undefined;
      for (let attempt = 1; !out; attempt++) {
        try {
          out = await this.clients.send<DescribeInstancesCommandOutput>(
            this.clients.ec2(region),
            new DescribeInstancesCommand({ InstanceIds: [id] }),
            'Describing this instance',
          );
        } catch (err) {
          if (awsErrorCode(err) !== 'InvalidInstanceID.NotFound' || attempt >= SELF_NOT_FOUND_ATTEMPTS) throw err;
          await sleep(Math.min(200 * 2 ** attempt, 5000));
        }
      }
      const instance = out.Reservations?.[0]?.Instances?.[0];
      if (!instance) throw new Error(`EC2 does not know this instance (${id})`);
      return { region, instance };
    })();
    this.selfInstance.catch(() => (this.selfInstance = undefined));
    return this.selfInstance;
  }
}
