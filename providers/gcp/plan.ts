/**
 * What `create` makes on GCP, as an explicit dependency graph of steps (docs/design.md#providers), following upstream
 * Constellation's Terraform (terraform/infrastructure/gcp):
 *
 *   network ── subnetwork ─┬───────────┐
 *                          ├─ router with Cloud NAT (after the subnetwork: one change to a network at a time)
 *                          ├─ firewall (public ports)  ├─ instance template (per node group) ─ managed instance group ─┐
 *                          └─ firewall (internal)      │                                                            │
 *   global address (load balancer IP) ───┘                                                            │
 *   health check (per port) ──────────────────────────────────────── backend service (per port) ──────┘
 *                                       target TCP proxy (per port) ─┘
 *   global address + target TCP proxy ─ global forwarding rule (per port)
 *
 * The load balancer is a global external TCP proxy load balancer, as upstream's: per port a health check, a
 * backend service (the control-plane instance groups, addressed through the groups' named port), a target TCP
 * proxy and a global forwarding rule on the one reserved global address. A proxy opens its own connection to
 * the node's own IP, so a node needs no route for the load balancer's address (a regional passthrough load
 * balancer delivers packets addressed to the load balancer's IP, which a node without Google's guest agent
 * drops). Control-plane groups are stateful (state disk and internal IP survive a recreation), as upstream's.
 * Instance templates carry the confidential settings (Secure Boot off, as upstream: it changes PCR 7 and
 * unsigned images do not boot), the state disk, labels and the metadata the nodes read (uid, role, node group,
 * load-balancer address, bcrypt hash of the init secret).
 * Pure: no SDK, no I/O. Names are deterministic, so a repeated insert answers "already exists".
 */
import type { protos } from '@google-cloud/compute';
import { z } from 'zod';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, NodeGroupSpec } from '../contract.js';
import { refId as url, type GcpKind, type GcpResource, type ResourceRef } from './clients.js';
import { checkMachineType, confidentialSettings } from './confidential.js';

/** The ports of docs/design.md#ports with their named port (upstream's names) and health check. */
export const LOAD_BALANCER_NAMED_PORTS = [
  { name: 'kubernetes', port: 6443, healthCheck: 'HTTPS' },
  { name: 'bootstrapper', port: 9000, healthCheck: 'TCP' },
  { name: 'join', port: 30090, healthCheck: 'TCP' },
  { name: 'verify', port: 30081, healthCheck: 'TCP' },
  { name: 'recovery', port: 9999, healthCheck: 'TCP' },
] as const;
export const LOAD_BALANCER_PORTS = LOAD_BALANCER_NAMED_PORTS.map((p) => p.port);
/** Kubernetes' NodePort range, open from anywhere as upstream opens it. */
export const NODE_PORT_RANGE = '30000-32767';
/** The device name of the state disk (the node finds its disk by it; the stateful policy keeps it by it). */
export const STATE_DISK_DEVICE = 'state-disk';
export const NODE_CIDR = '192.168.178.0/24';
export const POD_CIDR = '10.10.0.0/16';
const BOOT_DISK_GB = 10;

export const LABEL_UID = 'constellation-uid';
export const LABEL_ROLE = 'constellation-role';
export const LABEL_NODE_GROUP = 'constellation-node-group';
/** Metadata keys the nodes read (labels cannot hold a bcrypt hash: '$', '/', '.' and capitals are not allowed). */
export const META_UID = 'constellation-uid';
export const META_ROLE = 'constellation-role';
export const META_NODE_GROUP = 'constellation-node-group';
export const META_INIT_SECRET_HASH = 'constellation-init-secret-hash';
export const META_JOIN_SERVICE_KEY = 'constellation-join-service-key';
export const META_LOAD_BALANCER = 'constellation-load-balancer';
/** The image the instance boots (the config's `image`), so that `status` and an upgrade's rollback can tell. */
export const META_IMAGE = 'constellation-image';
/** The network's MTU, as upstream's (terraform/infrastructure/gcp/main.tf): GCP's largest, 8896. */
export const NETWORK_MTU = 8896;

export const gcpConfigSchema = z.object({
  project: z.string().min(1, 'is required'),
  region: z.string().min(1, 'is required'),
  zone: z.string().min(1, 'is required'),
  serviceAccountKeyPath: z.string().optional(),
  IAMServiceAccountVM: z.string().min(1, 'is required: the service account the nodes run as'),
  deployCSIDriver: z.boolean().optional(),
});
export type GcpConfig = z.infer<typeof gcpConfigSchema>;

export function parseGcpConfig(providerConfig: Record<string, unknown>): GcpConfig {
  const result = gcpConfigSchema.safeParse(providerConfig);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const message = issue.code === 'invalid_type' && issue.input === undefined ? 'is required' : issue.message;
    throw new UserError(`provider.gcp.${issue.path.join('.')} ${message}.`, {
      hint: 'Set it in constellation-conf.yaml (`constellation iam create gcp --update-config` fills project, region, zone and the service accounts).',
    });
  }
  return result.data;
}

/** GCP names: lowercase letters, digits and dashes, starting with a letter, at most 63 characters. */
export function gcpName(...parts: string[]): string {
  const name = parts
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-');
  return name.slice(0, 63).replace(/-+$/, '');
}

/** Label values: lowercase letters, digits, '_' and '-', at most 63 characters. */
export function labelValue(value: string): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .slice(0, 63);
}

/** Every resource name of a cluster starts with this; terminate --by-tag finds unlabeled kinds by it. */
export function namePrefix(uid: string): string {
  return gcpName('constell', uid);
}

export interface PlanStep {
  /** Task id in the create graph ("network", "hc-6443", "igm-worker_default"). */
  key: string;
  ref: ResourceRef;
  deps: string[];
  /** The insert body; `outputs` holds the resources of finished steps that asked for readBack. */
  body(outputs: ReadonlyMap<string, GcpResource>): object;
  /** Read the resource after creation (the address: its IP goes into templates and the result). */
  readBack?: boolean;
  /** Kept in the journal record (node group, role, uid ...). */
  data: Record<string, unknown>;
}

export interface Plan {
  steps: PlanStep[];
  config: GcpConfig;
  variant: string;
}

export function buildPlan(request: CreateRequest): Plan {
  const config = parseGcpConfig(request.providerConfig);
  if (request.nodeGroups.length === 0)
    throw new UserError('The config has no node groups.', { hint: 'Add nodeGroups to constellation-conf.yaml.' });
  for (const group of request.nodeGroups) checkMachineType(request.attestationVariant, group.instanceType, group.name);
  const variant = request.attestationVariant;
  if (!request.nodeGroups.some((g) => g.role === 'control-plane')) {
    throw new UserError('The config has no control-plane node group.', {
      hint: 'Add a node group with role control-plane.',
    });
  }

  const { project, region } = config;
  // A zone belongs to its region by name (europe-west3-b is in europe-west3); GCP would refuse the groups only later.
  for (const zone of [config.zone, ...request.nodeGroups.map((g) => g.zone).filter(Boolean)]) {
    if (!zone.startsWith(`${region}-`)) {
      const where =
        zone === config.zone
          ? 'provider.gcp.zone'
          : `the zone of node group ${request.nodeGroups.find((g) => g.zone === zone)!.name}`;
      throw new UserError(`${where} (${zone}) is not in the region ${region}.`, {
        hint: `Use a zone of ${region}, such as ${region}-a, or change provider.gcp.region.`,
      });
    }
  }
  const prefix = namePrefix(request.uid);
  const baseLabels: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.tags)) baseLabels[labelValue(k)] = labelValue(v);
  baseLabels[LABEL_UID] = labelValue(request.uid);
  // Enough to find the cluster's resources by tag even when most records are lost.
  const zones = [...new Set(request.nodeGroups.map((g) => g.zone || config.zone))];
  const common = { uid: request.uid, project, region, zones };
  const ref = (kind: GcpKind, name: string, location?: string): ResourceRef => ({ kind, project, location, name });
  const description = `Constellation cluster ${request.name} (uid ${request.uid})`;
  const nodeTag = prefix;

  const network = ref('network', gcpName(prefix, 'network'));
  const subnet = ref('subnetwork', gcpName(prefix, 'nodes'), region);
  const address = ref('globalAddress', gcpName(prefix, 'lb'));
  const steps: PlanStep[] = [];
  const add = (step: Omit<PlanStep, 'data'> & { data?: Record<string, unknown> }) =>
    steps.push({ ...step, data: { ...common, ...step.data } });

  add({
    key: 'network',
    ref: network,
    deps: [],
    body: (): protos.google.cloud.compute.v1.INetwork => ({
      description,
      autoCreateSubnetworks: false,
      mtu: NETWORK_MTU,
      routingConfig: { routingMode: 'REGIONAL' },
    }),
  });
  add({
    key: 'subnetwork',
    ref: subnet,
    deps: ['network'],
    body: (): protos.google.cloud.compute.v1.ISubnetwork => ({
      description,
      network: url(network),
      region,
      ipCidrRange: NODE_CIDR,
      secondaryIpRanges: [{ rangeName: 'pods', ipCidrRange: POD_CIDR }],
      privateIpGoogleAccess: true,
    }),
  });
  // GCP takes one change to a network at a time (resourceNotReady, retried by the inserts): the subnetwork, which
  // the instance templates wait for, goes first; the router and firewall rules follow it.
  add({
    key: 'router',
    ref: ref('router', gcpName(prefix, 'router'), region),
    deps: ['network', 'subnetwork'],
    body: (): protos.google.cloud.compute.v1.IRouter => ({
      description,
      network: url(network),
      region,
      nats: [
        {
          name: gcpName(prefix, 'nat'),
          natIpAllocateOption: 'AUTO_ONLY',
          sourceSubnetworkIpRangesToNat: 'ALL_SUBNETWORKS_ALL_IP_RANGES',
        },
      ],
    }),
  });
  add({
    key: 'firewall-public',
    ref: ref('firewall', gcpName(prefix, 'public')),
    deps: ['network', 'subnetwork'],
    body: (): protos.google.cloud.compute.v1.IFirewall => ({
      // The TCP proxies and health checks connect from Google's front ends (130.211.0.0/22, 35.191.0.0/16).
      description: `${description}: the load balancer's ports, its proxies and health checks, and the NodePort range`,
      network: url(network),
      direction: 'INGRESS',
      sourceRanges: ['0.0.0.0/0'],
      targetTags: [nodeTag],
      allowed: [{ IPProtocol: 'tcp', ports: [...LOAD_BALANCER_PORTS.map(String), NODE_PORT_RANGE] }],
    }),
  });
  add({
    key: 'firewall-internal',
    ref: ref('firewall', gcpName(prefix, 'internal')),
    deps: ['network', 'subnetwork'],
    body: (): protos.google.cloud.compute.v1.IFirewall => ({
      description: `${description}: traffic between nodes and pods`,
      network: url(network),
      direction: 'INGRESS',
      sourceRanges: [NODE_CIDR, POD_CIDR],
      allowed: [{ IPProtocol: 'tcp' }, { IPProtocol: 'udp' }, { IPProtocol: 'icmp' }],
    }),
  });
  add({
    key: 'address',
    ref: address,
    deps: [],
    readBack: true,
    body: (): protos.google.cloud.compute.v1.IAddress => ({
      description,
      addressType: 'EXTERNAL',
      ipVersion: 'IPV4',
      labels: { ...baseLabels },
    }),
  });
  for (const { port, healthCheck } of LOAD_BALANCER_NAMED_PORTS) {
    add({
      key: `hc-${port}`,
      ref: ref('healthCheck', gcpName(prefix, 'hc', String(port))),
      deps: [],
      body: (): protos.google.cloud.compute.v1.IHealthCheck =>
        healthCheck === 'HTTPS'
          ? {
              description,
              type: 'HTTPS',
              checkIntervalSec: 5,
              timeoutSec: 5,
              httpsHealthCheck: { port, requestPath: '/readyz' },
            }
          : { description, type: 'TCP', checkIntervalSec: 5, timeoutSec: 5, tcpHealthCheck: { port } },
    });
  }

  const controlPlaneIgmKeys: string[] = [];
  const igmRefs: ResourceRef[] = [];
  for (const group of request.nodeGroups) {
    const zone = group.zone || config.zone;
    const groupName = gcpName(prefix, group.name);
    const template = ref('instanceTemplate', groupName);
    const igm = ref('instanceGroupManager', groupName, zone);
    const groupData = { nodeGroup: group.name, role: group.role, zone };
    add({
      key: `template-${group.name}`,
      ref: template,
      deps: ['network', 'subnetwork', 'address'],
      data: groupData,
      body: (outputs) => ({
        description,
        properties: instanceProperties(request, config, variant, group, {
          network: url(network),
          subnetwork: url(subnet),
          nodeTag,
          labels: { ...baseLabels, [LABEL_ROLE]: group.role, [LABEL_NODE_GROUP]: labelValue(group.name) },
          loadBalancer: String(outputs.get('address')?.address ?? ''),
        }),
      }),
    });
    add({
      key: `igm-${group.name}`,
      ref: igm,
      deps: [`template-${group.name}`],
      data: groupData,
      body: (): protos.google.cloud.compute.v1.IInstanceGroupManager => ({
        description,
        zone,
        baseInstanceName: gcpName(prefix, group.role === 'control-plane' ? 'cp' : 'wk', group.name)
          .slice(0, 58)
          .replace(/-+$/, ''),
        instanceTemplate: url(template),
        targetSize: group.initialCount,
        ...(group.role === 'control-plane'
          ? {
              // The backend services address the control plane by these names (TCP proxy backends need named ports).
              namedPorts: LOAD_BALANCER_NAMED_PORTS.map(({ name, port }) => ({ name, port })),
              // A recreated control-plane VM keeps its state disk (etcd, the node's keys) and its IP, as upstream's.
              statefulPolicy: {
                preservedState: {
                  disks: { [STATE_DISK_DEVICE]: { autoDelete: 'ON_PERMANENT_INSTANCE_DELETION' } },
                  internalIPs: { nic0: { autoDelete: 'ON_PERMANENT_INSTANCE_DELETION' } },
                },
              },
            }
          : {}),
      }),
    });
    if (group.role === 'control-plane') {
      controlPlaneIgmKeys.push(`igm-${group.name}`);
      igmRefs.push(igm);
    }
  }

  for (const { name, port } of LOAD_BALANCER_NAMED_PORTS) {
    const backend = ref('backendService', gcpName(prefix, 'bs', String(port)));
    const proxy = ref('targetTcpProxy', gcpName(prefix, 'proxy', String(port)));
    add({
      key: `bs-${port}`,
      ref: backend,
      deps: [`hc-${port}`, ...controlPlaneIgmKeys],
      body: (): protos.google.cloud.compute.v1.IBackendService => ({
        description,
        loadBalancingScheme: 'EXTERNAL',
        protocol: 'TCP',
        portName: name,
        timeoutSec: 240,
        healthChecks: [url(ref('healthCheck', gcpName(prefix, 'hc', String(port))))],
        // A managed instance group's instance group has the manager's name.
        backends: igmRefs.map((igm) => ({
          group: `projects/${project}/zones/${igm.location}/instanceGroups/${igm.name}`,
          balancingMode: 'UTILIZATION',
        })),
      }),
    });
    add({
      key: `proxy-${port}`,
      ref: proxy,
      deps: [`bs-${port}`],
      body: (): protos.google.cloud.compute.v1.ITargetTcpProxy => ({
        description,
        service: url(backend),
        proxyHeader: 'NONE',
      }),
    });
    add({
      key: `fr-${port}`,
      ref: ref('globalForwardingRule', gcpName(prefix, 'fr', String(port))),
      deps: [`proxy-${port}`, 'address'],
      body: (): protos.google.cloud.compute.v1.IForwardingRule => ({
        description,
        loadBalancingScheme: 'EXTERNAL',
        IPProtocol: 'TCP',
        IPAddress: url(address),
        portRange: String(port),
        target: url(proxy),
        labels: { ...baseLabels, 'constellation-use': name },
      }),
    });
  }
  return { steps, config, variant };
}

function instanceProperties(
  request: CreateRequest,
  config: GcpConfig,
  variant: string,
  group: NodeGroupSpec,
  ctx: { network: string; subnetwork: string; nodeTag: string; labels: Record<string, string>; loadBalancer: string },
): protos.google.cloud.compute.v1.IInstanceProperties {
  const metadata: Record<string, string> = {
    [META_UID]: request.uid,
    [META_ROLE]: group.role,
    [META_NODE_GROUP]: group.name,
    [META_INIT_SECRET_HASH]: request.initSecretHash,
    [META_JOIN_SERVICE_KEY]: request.joinServiceKey,
    [META_LOAD_BALANCER]: ctx.loadBalancer,
    [META_IMAGE]: request.image,
    'kubernetes-version': request.kubernetesVersion,
    // The serial console output is how a node that does not come up is debugged, as upstream enables it
    // (terraform/infrastructure/gcp/modules/instance_group/main.tf); it is output only, nothing logs secrets there.
    'serial-port-enable': 'TRUE',
  };
  return {
    machineType: group.instanceType,
    ...confidentialSettings(variant),
    disks: [
      {
        boot: true,
        autoDelete: true,
        deviceName: 'boot',
        initializeParams: {
          sourceImage: request.image,
          diskSizeGb: BOOT_DISK_GB,
          diskType: 'pd-balanced',
          labels: { ...ctx.labels },
        },
      },
      // The state disk: the bootstrapper encrypts it with the key the join service derives for this node.
      {
        boot: false,
        autoDelete: true,
        deviceName: STATE_DISK_DEVICE,
        initializeParams: {
          diskSizeGb: group.stateDiskSizeGB,
          diskType: group.stateDiskType,
          labels: { ...ctx.labels },
        },
      },
    ],
    networkInterfaces: [
      {
        network: ctx.network,
        subnetwork: ctx.subnetwork,
        aliasIpRanges: [{ ipCidrRange: '/24', subnetworkRangeName: 'pods' }],
      },
    ],
    labels: ctx.labels,
    tags: { items: [ctx.nodeTag] },
    metadata: { items: Object.entries(metadata).map(([key, value]) => ({ key, value })) },
    // Access is granted through the service account's roles, not through scopes (as upstream).
    serviceAccounts: [
      { email: config.IAMServiceAccountVM, scopes: ['https://www.googleapis.com/auth/cloud-platform'] },
    ],
  };
}
