/**
 * What `create` makes on GCP, as an explicit dependency graph of steps (DESIGN §9):
 *
 *   network ─┬─ subnetwork ─────────────┐
 *            ├─ router with Cloud NAT    │
 *            ├─ firewall (public ports)  ├─ instance template (per node group) ─ managed instance group ─┐
 *            └─ firewall (internal)      │                                                            │
 *   address (load balancer IP) ──────────┘───────────────────────────────────── forwarding rule (per port)
 *   health check (per port) ─────────────────────────────────────────── backend service (per port) ──┘
 *
 * The load balancer is a regional external passthrough network load balancer: one health check, backend
 * service (the control-plane instance groups) and forwarding rule per port, all forwarding rules sharing the
 * one reserved address. Instance templates carry the confidential settings, the state disk, labels and the
 * metadata the nodes read (uid, role, node group, load-balancer address, bcrypt hash of the init secret).
 * Pure: no SDK, no I/O. Names are deterministic, so a repeated insert answers "already exists".
 */
import type { protos } from '@google-cloud/compute';
import { z } from 'zod';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, NodeGroupSpec } from '../contract.js';
import { refId as url, type GcpKind, type GcpResource, type ResourceRef } from './clients.js';
import { checkMachineType, confidentialSettings, type GcpVariant } from './confidential.js';

/** The ports of DESIGN §9: Kubernetes API, bootstrapper, join service, verify service, recovery. */
export const LOAD_BALANCER_PORTS = [6443, 9000, 30090, 30081, 9999] as const;
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
export const META_LOAD_BALANCER = 'constellation-load-balancer';

export const gcpConfigSchema = z.object({
  project: z.string().min(1, 'is required'),
  region: z.string().min(1, 'is required'),
  zone: z.string().min(1, 'is required'),
  serviceAccountKeyPath: z.string().optional(),
  IAMServiceAccountVM: z.string().optional(),
  deployCSIDriver: z.boolean().optional(),
});
export type GcpConfig = z.infer<typeof gcpConfigSchema>;

export function parseGcpConfig(providerConfig: Record<string, unknown>): GcpConfig {
  const result = gcpConfigSchema.safeParse(providerConfig);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new UserError(`provider.gcp.${issue.path.join('.')} ${issue.message}.`, {
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
  return value.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').slice(0, 63);
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
  variant: GcpVariant;
}

export function buildPlan(request: CreateRequest): Plan {
  const config = parseGcpConfig(request.providerConfig);
  if (request.nodeGroups.length === 0) throw new UserError('The config has no node groups.', { hint: 'Add nodeGroups to constellation-conf.yaml.' });
  for (const group of request.nodeGroups) checkMachineType(request.attestationVariant, group.instanceType, group.name);
  const variant = request.attestationVariant as GcpVariant;
  if (!request.nodeGroups.some((g) => g.role === 'control-plane')) {
    throw new UserError('The config has no control-plane node group.', { hint: 'Add a node group with role control-plane.' });
  }

  const { project, region } = config;
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
  const address = ref('address', gcpName(prefix, 'lb'), region);
  const steps: PlanStep[] = [];
  const add = (step: Omit<PlanStep, 'data'> & { data?: Record<string, unknown> }) => steps.push({ ...step, data: { ...common, ...step.data } });

  add({ key: 'network', ref: network, deps: [], body: (): protos.google.cloud.compute.v1.INetwork => ({ description, autoCreateSubnetworks: false, routingConfig: { routingMode: 'REGIONAL' } }) });
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
  add({
    key: 'router',
    ref: ref('router', gcpName(prefix, 'router'), region),
    deps: ['network'],
    body: (): protos.google.cloud.compute.v1.IRouter => ({
      description,
      network: url(network),
      region,
      nats: [{ name: gcpName(prefix, 'nat'), natIpAllocateOption: 'AUTO_ONLY', sourceSubnetworkIpRangesToNat: 'ALL_SUBNETWORKS_ALL_IP_RANGES' }],
    }),
  });
  add({
    key: 'firewall-public',
    ref: ref('firewall', gcpName(prefix, 'public')),
    deps: ['network'],
    body: (): protos.google.cloud.compute.v1.IFirewall => ({
      description: `${description}: the load balancer's ports and its health checks`,
      network: url(network),
      direction: 'INGRESS',
      sourceRanges: ['0.0.0.0/0'],
      targetTags: [nodeTag],
      allowed: [{ IPProtocol: 'tcp', ports: LOAD_BALANCER_PORTS.map(String) }],
    }),
  });
  add({
    key: 'firewall-internal',
    ref: ref('firewall', gcpName(prefix, 'internal')),
    deps: ['network'],
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
    body: (): protos.google.cloud.compute.v1.IAddress => ({ description, region, addressType: 'EXTERNAL', labels: { ...baseLabels } }),
  });
  for (const port of LOAD_BALANCER_PORTS) {
    add({
      key: `hc-${port}`,
      ref: ref('healthCheck', gcpName(prefix, 'hc', String(port)), region),
      deps: [],
      body: (): protos.google.cloud.compute.v1.IHealthCheck =>
        port === 6443
          ? { description, region, type: 'HTTPS', checkIntervalSec: 5, timeoutSec: 5, httpsHealthCheck: { port, requestPath: '/readyz' } }
          : { description, region, type: 'TCP', checkIntervalSec: 5, timeoutSec: 5, tcpHealthCheck: { port } },
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
        baseInstanceName: gcpName(prefix, group.role === 'control-plane' ? 'cp' : 'wk', group.name).slice(0, 58).replace(/-+$/, ''),
        instanceTemplate: url(template),
        targetSize: group.initialCount,
      }),
    });
    if (group.role === 'control-plane') {
      controlPlaneIgmKeys.push(`igm-${group.name}`);
      igmRefs.push(igm);
    }
  }

  for (const port of LOAD_BALANCER_PORTS) {
    const backend = ref('backendService', gcpName(prefix, 'bs', String(port)), region);
    add({
      key: `bs-${port}`,
      ref: backend,
      deps: [`hc-${port}`, ...controlPlaneIgmKeys],
      body: (): protos.google.cloud.compute.v1.IBackendService => ({
        description,
        region,
        loadBalancingScheme: 'EXTERNAL',
        protocol: 'TCP',
        healthChecks: [url(ref('healthCheck', gcpName(prefix, 'hc', String(port)), region))],
        // A managed instance group's instance group has the manager's name.
        backends: igmRefs.map((igm) => ({ group: `projects/${project}/zones/${igm.location}/instanceGroups/${igm.name}`, balancingMode: 'CONNECTION' })),
      }),
    });
    add({
      key: `fr-${port}`,
      ref: ref('forwardingRule', gcpName(prefix, 'fr', String(port)), region),
      deps: [`bs-${port}`, 'address'],
      body: (): protos.google.cloud.compute.v1.IForwardingRule => ({
        description,
        region,
        loadBalancingScheme: 'EXTERNAL',
        IPProtocol: 'TCP',
        IPAddress: url(address),
        portRange: String(port),
        backendService: url(backend),
        labels: { ...baseLabels },
      }),
    });
  }
  return { steps, config, variant };
}

function instanceProperties(
  request: CreateRequest,
  config: GcpConfig,
  variant: GcpVariant,
  group: NodeGroupSpec,
  ctx: { network: string; subnetwork: string; nodeTag: string; labels: Record<string, string>; loadBalancer: string },
): protos.google.cloud.compute.v1.IInstanceProperties {
  const metadata: Record<string, string> = {
    [META_UID]: request.uid,
    [META_ROLE]: group.role,
    [META_NODE_GROUP]: group.name,
    [META_INIT_SECRET_HASH]: request.initSecretHash,
    [META_LOAD_BALANCER]: ctx.loadBalancer,
    'kubernetes-version': request.kubernetesVersion,
    'serial-port-enable': 'FALSE',
  };
  return {
    machineType: group.instanceType,
    ...confidentialSettings(variant),
    disks: [
      { boot: true, autoDelete: true, deviceName: 'boot', initializeParams: { sourceImage: request.image, diskSizeGb: BOOT_DISK_GB, diskType: 'pd-balanced', labels: { ...ctx.labels } } },
      // The state disk: the bootstrapper encrypts it with the key the join service derives for this node.
      { boot: false, autoDelete: true, deviceName: 'state-disk', initializeParams: { diskSizeGb: group.stateDiskSizeGB, diskType: group.stateDiskType, labels: { ...ctx.labels } } },
    ],
    networkInterfaces: [{ network: ctx.network, subnetwork: ctx.subnetwork, aliasIpRanges: [{ ipCidrRange: '/24', subnetworkRangeName: 'pods' }] }],
    labels: ctx.labels,
    tags: { items: [ctx.nodeTag] },
    metadata: { items: Object.entries(metadata).map(([key, value]) => ({ key, value })) },
    ...(config.IAMServiceAccountVM
      ? { serviceAccounts: [{ email: config.IAMServiceAccountVM, scopes: ['https://www.googleapis.com/auth/cloud-platform'] }] }
      : {}),
  };
}
