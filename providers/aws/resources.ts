/**
 * What an AWS cluster is made of, as data: resource kinds (as recorded in the journal), the load balancer's
 * ports and health checks (docs/design.md#ports), the network layout, names within AWS's length limits, and tags.
 */
import type { CreateRequest, NodeRole, RecordedResource } from '../contract.js';

export const KIND = {
  vpc: 'aws:vpc',
  internetGateway: 'aws:internet-gateway',
  internetGatewayAttachment: 'aws:internet-gateway-attachment',
  subnet: 'aws:subnet',
  elasticIp: 'aws:elastic-ip',
  natGateway: 'aws:nat-gateway',
  routeTable: 'aws:route-table',
  route: 'aws:route',
  routeTableAssociation: 'aws:route-table-association',
  securityGroup: 'aws:security-group',
  loadBalancer: 'aws:load-balancer',
  targetGroup: 'aws:target-group',
  listener: 'aws:listener',
  launchTemplate: 'aws:launch-template',
  autoScalingGroup: 'aws:autoscaling-group',
  instance: 'aws:instance',
} as const;

export const IAM_KIND = {
  role: 'aws:iam-role',
  rolePolicy: 'aws:iam-role-policy',
  instanceProfile: 'aws:iam-instance-profile',
  instanceProfileRole: 'aws:iam-instance-profile-role',
} as const;

export function isIamResource(r: RecordedResource): boolean {
  return r.kind.startsWith('aws:iam-');
}

export function isInfrastructureResource(r: RecordedResource): boolean {
  return r.kind.startsWith('aws:') && !isIamResource(r);
}

/** The journal's data of every AWS resource: where it lives and which cluster it belongs to. */
export interface RecordData {
  region: string;
  uid?: string;
  [key: string]: unknown;
}

export function recordData(r: RecordedResource): RecordData {
  return (r.data ?? {}) as RecordData;
}

export interface LoadBalancerPort {
  name: string;
  port: number;
  healthCheck: { protocol: 'TCP' | 'HTTPS'; path?: string };
}

/** docs/design.md#ports: the control plane's ports behind the load balancer, each with its own health check. */
export const LOAD_BALANCER_PORTS: readonly LoadBalancerPort[] = [
  { name: 'kubernetes', port: 6443, healthCheck: { protocol: 'HTTPS', path: '/readyz' } },
  { name: 'bootstrapper', port: 9000, healthCheck: { protocol: 'TCP' } },
  { name: 'join', port: 30090, healthCheck: { protocol: 'TCP' } },
  { name: 'verify', port: 30081, healthCheck: { protocol: 'TCP' } },
  { name: 'recovery', port: 9999, healthCheck: { protocol: 'TCP' } },
];

/** Kubernetes' NodePort range, open from anywhere as upstream's security group opens it. */
export const NODE_PORT_RANGE = { from: 30000, to: 32767 } as const;

export const VPC_CIDR = '192.168.0.0/16';

/** Target groups' deregistration delay: how long a drained target keeps its connections (AWS's default is 300 s). */
export const DEREGISTRATION_DELAY_SECONDS = 30;

/** Zone i gets a private /20 from the lower half of the VPC and a public /20 from the upper half. */
export function subnetCidr(kind: 'private' | 'public', index: number): string {
  if (index > 7) throw new Error('at most 8 zones per cluster');
  return `192.168.${(kind === 'public' ? 128 : 0) + index * 16}.0/20`;
}

export const TAG = {
  uid: 'constellation-uid',
  role: 'constellation-role',
  nodeGroup: 'constellation-node-group',
  initSecretHash: 'constellation-init-secret-hash',
  joinServiceKey: 'constellation-join-service-key',
  name: 'Name',
} as const;

/** Tags every resource of the cluster carries: the user's tags from the config, the uid, a Name. */
export function clusterTags(request: CreateRequest, name: string): Record<string, string> {
  return {
    ...request.tags,
    [TAG.uid]: request.uid,
    [`kubernetes.io/cluster/${request.name}-${request.uid}`]: 'owned',
    [TAG.name]: name,
  };
}

/** Tags of a node group's launch template, group and instances (the node side reads them). */
export function nodeTags(request: CreateRequest, group: string, role: NodeRole): Record<string, string> {
  return {
    [TAG.role]: role,
    [TAG.nodeGroup]: group,
    [TAG.initSecretHash]: request.initSecretHash,
    [TAG.joinServiceKey]: request.joinServiceKey,
  };
}

export function toTagList(tags: Record<string, string>): { Key: string; Value: string }[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

export function tagValue(tags: { Key?: string; Value?: string }[] | undefined, key: string): string | undefined {
  return tags?.find((t) => t.Key === key)?.Value;
}

/**
 * A name `<cluster name>-<uid>[-<suffix>]` that fits AWS's limit for the resource (32 for load balancers and
 * target groups): the cluster name is shortened, the uid (which makes it unique) and the suffix are kept.
 */
export function awsName(request: Pick<CreateRequest, 'name' | 'uid'>, suffix: string, maxLength: number): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9-]+/g, '-').replace(/^-+|-+$/g, '');
  const uid = clean(request.uid);
  const tail = [uid, clean(suffix)].filter(Boolean).join('-');
  const room = maxLength - tail.length - 1;
  const head = room > 0 ? clean(clean(request.name).slice(0, room)) : '';
  return (head ? `${head}-${tail}` : tail).slice(0, maxLength);
}
