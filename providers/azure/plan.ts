/**
 * What `create` makes on Azure, as data: every resource with its deterministic name and ARM id, the resources
 * it depends on, and the request body the SDK sends. Pure (no SDK calls), so the dependency order is explicit
 * and visible in one place, tests can inspect it, and the benchmark computes the critical path from it.
 *
 *   resource-group ─┬─ public-ip:lb ── load-balancer ──────────────┐
 *                   ├─ public-ip:nat ── nat-gateway ──┐             ├─ vmss:<node group> (one per group)
 *                   └─ network-security-group ────────┴─ vnet ──────┘
 *
 * Workers reach the internet through the NAT gateway; the control plane is behind the load balancer, which
 * forwards and health-checks the ports of docs/design.md#ports. Names are derived from the cluster name and uid, so a
 * re-run PUTs the same resources again (ARM PUT is idempotent) instead of making new ones.
 */
import type { VirtualMachineScaleSet } from '@azure/arm-compute';
import type {
  LoadBalancer,
  NatGateway,
  NetworkSecurityGroup,
  PublicIPAddress,
  VirtualNetwork,
} from '@azure/arm-network';
import type { CreateRequest, NodeGroupSpec, NodeRole } from '../contract.js';
import { UserError } from '../../lib/errors.js';
import { assertInstanceType, securitySettings } from './confidential.js';

/** Load-balanced ports (docs/design.md#ports) and their probes: the API server's is HTTPS GET /readyz, as upstream's. */
export const CLUSTER_PORTS = [
  { name: 'kubernetes', port: 6443, probe: { protocol: 'Https', requestPath: '/readyz' } },
  { name: 'bootstrapper', port: 9000, probe: { protocol: 'Tcp' } },
  { name: 'join', port: 30090, probe: { protocol: 'Tcp' } },
  { name: 'verify', port: 30081, probe: { protocol: 'Tcp' } },
  { name: 'recovery', port: 9999, probe: { protocol: 'Tcp' } },
] as const;

export const TAG_UID = 'constellation-uid';
export const TAG_ROLE = 'constellation-role';
export const TAG_NODE_GROUP = 'constellation-node-group';
export const TAG_INIT_SECRET_HASH = 'constellation-init-secret-hash';
export const TAG_JOIN_SERVICE_KEY = 'constellation-join-service-key';

export const VNET_CIDR = '10.0.0.0/16';
export const NODE_SUBNET_CIDR = '10.0.0.0/20';
export const NODE_SUBNET_NAME = 'nodes';
export const BACKEND_POOL_NAME = 'control-plane';
export const FRONTEND_NAME = 'frontend';

/** The config's provider.azure section. */
export interface AzureConfig {
  subscription: string;
  tenant?: string;
  location: string;
  resourceGroup: string;
  /** Resource id of the user-assigned identity the nodes run as (made by `iam create azure`). */
  userAssignedIdentity: string;
  deployCSIDriver: boolean;
  secureBoot: boolean;
}

export type AzureResourceKind =
  | 'azure:resource-group'
  | 'azure:public-ip'
  | 'azure:nat-gateway'
  | 'azure:network-security-group'
  | 'azure:vnet'
  | 'azure:load-balancer'
  | 'azure:vmss'
  | 'azure:user-assigned-identity'
  | 'azure:role-assignment';

interface PlannedBase {
  /** Task id inside the plan, e.g. "vnet", "vmss:worker_default". */
  key: string;
  name: string;
  id: string;
  dependsOn: string[];
}

export type PlannedResource =
  | (PlannedBase & { kind: 'azure:resource-group'; body: { location: string; tags: Record<string, string> } })
  | (PlannedBase & { kind: 'azure:public-ip'; body: PublicIPAddress })
  | (PlannedBase & { kind: 'azure:nat-gateway'; body: NatGateway })
  | (PlannedBase & { kind: 'azure:network-security-group'; body: NetworkSecurityGroup })
  | (PlannedBase & { kind: 'azure:vnet'; body: VirtualNetwork })
  | (PlannedBase & { kind: 'azure:load-balancer'; body: LoadBalancer })
  | (PlannedBase & {
      kind: 'azure:vmss';
      nodeGroup: string;
      role: NodeRole;
      /** Filled in by create with a throwaway key (Azure requires one; the node images run no sshd). */
      body: (sshPublicKey: string) => VirtualMachineScaleSet;
    });

const PROVIDER_PATHS: Record<Exclude<AzureResourceKind, 'azure:resource-group' | 'azure:role-assignment'>, string> = {
  'azure:public-ip': 'Microsoft.Network/publicIPAddresses',
  'azure:nat-gateway': 'Microsoft.Network/natGateways',
  'azure:network-security-group': 'Microsoft.Network/networkSecurityGroups',
  'azure:vnet': 'Microsoft.Network/virtualNetworks',
  'azure:load-balancer': 'Microsoft.Network/loadBalancers',
  'azure:vmss': 'Microsoft.Compute/virtualMachineScaleSets',
  'azure:user-assigned-identity': 'Microsoft.ManagedIdentity/userAssignedIdentities',
};

export function resourceGroupId(subscription: string, resourceGroup: string): string {
  return `/subscriptions/${subscription}/resourceGroups/${resourceGroup}`;
}

export function resourceId(
  subscription: string,
  resourceGroup: string,
  kind: keyof typeof PROVIDER_PATHS,
  name: string,
): string {
  return `${resourceGroupId(subscription, resourceGroup)}/providers/${PROVIDER_PATHS[kind]}/${name}`;
}

/** The kind of an ARM resource type ("Microsoft.Network/loadBalancers"), for resources found by tag. */
export function kindOfType(type: string): AzureResourceKind | undefined {
  const entry = Object.entries(PROVIDER_PATHS).find(([, path]) => path.toLowerCase() === type.toLowerCase());
  return entry?.[0] as AzureResourceKind | undefined;
}

/** Parts of an ARM id: /subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/{child}/{childName}]. */
export function parseResourceId(id: string): {
  subscription: string;
  resourceGroup: string;
  name: string;
  segments: string[];
} {
  const segments = id.split('/').filter(Boolean);
  const at = (key: string) => {
    const i = segments.findIndex((s) => s.toLowerCase() === key.toLowerCase());
    return i >= 0 ? segments[i + 1] : undefined;
  };
  const subscription = at('subscriptions');
  const resourceGroup = at('resourceGroups');
  if (!subscription || !resourceGroup) throw new UserError(`"${id}" is not an Azure resource id.`);
  return { subscription, resourceGroup, name: segments[segments.length - 1], segments };
}

function requireString(section: Record<string, unknown>, key: string): string {
  const value = section[key];
  if (typeof value !== 'string' || value.trim() === '') {
    throw new UserError(`provider.azure.${key} is not set in the config.`, {
      hint:
        key === 'userAssignedIdentity' || key === 'resourceGroup'
          ? 'Run `constellation iam create azure --update-config` to make the identity and resource group and fill them in.'
          : `Set provider.azure.${key} in constellation-conf.yaml.`,
    });
  }
  return value.trim();
}

export function parseAzureConfig(section: Record<string, unknown>): AzureConfig {
  const subscription = requireString(section, 'subscription');
  const resourceGroup = requireString(section, 'resourceGroup');
  const identity = requireString(section, 'userAssignedIdentity');
  return {
    subscription,
    tenant: typeof section.tenant === 'string' ? section.tenant : undefined,
    location: requireString(section, 'location'),
    resourceGroup,
    userAssignedIdentity: identity.startsWith('/')
      ? identity
      : resourceId(subscription, resourceGroup, 'azure:user-assigned-identity', identity),
    deployCSIDriver: section.deployCSIDriver === true,
    secureBoot: section.secureBoot === true,
  };
}

/** Lowercase letters, digits and dashes, as every Azure resource and host name accepts. */
function dnsSafe(value: string, max: number): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, max)
    .replace(/-+$/, '');
}

/** The prefix of every resource name: cluster name and uid. */
export function baseName(request: Pick<CreateRequest, 'name' | 'uid'>): string {
  return `${dnsSafe(request.name, 24) || 'constell'}-${dnsSafe(request.uid, 16)}`;
}

export function imageReference(image: string): {
  id?: string;
  communityGalleryImageId?: string;
  sharedGalleryImageId?: string;
} {
  if (/^\/CommunityGalleries\//i.test(image)) return { communityGalleryImageId: image };
  if (/^\/SharedGalleries\//i.test(image)) return { sharedGalleryImageId: image };
  if (image.startsWith('/subscriptions/')) return { id: image };
  throw new UserError(`"${image}" is not an Azure image reference.`, {
    hint: 'Use an image resource id (/subscriptions/...), a community gallery image (/CommunityGalleries/...) or a shared gallery image (/SharedGalleries/...).',
  });
}

/** Builds the plan for a create request. Throws a UserError for config that Azure would refuse. */
export function planResources(request: CreateRequest, config: AzureConfig): PlannedResource[] {
  const variant = request.attestationVariant;
  const security = securitySettings(variant);
  for (const group of request.nodeGroups) assertInstanceType(variant, group.name, group.instanceType);
  const image = imageReference(request.image);
  const { subscription, resourceGroup, location } = config;
  const base = baseName(request);
  const tags = { ...request.tags, [TAG_UID]: request.uid };
  const id = (kind: keyof typeof PROVIDER_PATHS, name: string) => resourceId(subscription, resourceGroup, kind, name);

  const names = {
    lbIp: `${base}-lb-ip`,
    natIp: `${base}-nat-ip`,
    nat: `${base}-nat`,
    nsg: `${base}-nsg`,
    vnet: `${base}-vnet`,
    lb: `${base}-lb`,
  };
  const lbId = id('azure:load-balancer', names.lb);
  const frontendId = `${lbId}/frontendIPConfigurations/${FRONTEND_NAME}`;
  const backendPoolId = `${lbId}/backendAddressPools/${BACKEND_POOL_NAME}`;
  const subnetId = `${id('azure:vnet', names.vnet)}/subnets/${NODE_SUBNET_NAME}`;
  const standardIp = (): PublicIPAddress => ({
    location,
    tags,
    sku: { name: 'Standard', tier: 'Regional' },
    publicIPAllocationMethod: 'Static',
    publicIPAddressVersion: 'IPv4',
  });

  const plan: PlannedResource[] = [
    {
      key: 'resource-group',
      kind: 'azure:resource-group',
      name: resourceGroup,
      id: resourceGroupId(subscription, resourceGroup),
      dependsOn: [],
      body: { location, tags },
    },
    {
      key: 'public-ip:lb',
      kind: 'azure:public-ip',
      name: names.lbIp,
      id: id('azure:public-ip', names.lbIp),
      dependsOn: ['resource-group'],
      body: standardIp(),
    },
    {
      key: 'public-ip:nat',
      kind: 'azure:public-ip',
      name: names.natIp,
      id: id('azure:public-ip', names.natIp),
      dependsOn: ['resource-group'],
      body: standardIp(),
    },
    {
      key: 'nat-gateway',
      kind: 'azure:nat-gateway',
      name: names.nat,
      id: id('azure:nat-gateway', names.nat),
      dependsOn: ['public-ip:nat'],
      body: {
        location,
        tags,
        sku: { name: 'Standard' },
        idleTimeoutInMinutes: 10,
        publicIpAddresses: [{ id: id('azure:public-ip', names.natIp) }],
      },
    },
    {
      key: 'network-security-group',
      kind: 'azure:network-security-group',
      name: names.nsg,
      id: id('azure:network-security-group', names.nsg),
      dependsOn: ['resource-group'],
      body: {
        location,
        tags,
        securityRules: CLUSTER_PORTS.map(({ name, port }, i) => ({
          name: `allow-${name}`,
          priority: 100 + i,
          direction: 'Inbound',
          access: 'Allow',
          protocol: 'Tcp',
          sourceAddressPrefix: '*',
          sourcePortRange: '*',
          destinationAddressPrefix: '*',
          destinationPortRange: String(port),
        })),
      },
    },
    {
      key: 'vnet',
      kind: 'azure:vnet',
      name: names.vnet,
      id: id('azure:vnet', names.vnet),
      dependsOn: ['nat-gateway', 'network-security-group'],
      body: {
        location,
        tags,
        addressSpace: { addressPrefixes: [VNET_CIDR] },
        subnets: [
          {
            name: NODE_SUBNET_NAME,
            addressPrefix: NODE_SUBNET_CIDR,
            natGateway: { id: id('azure:nat-gateway', names.nat) },
            networkSecurityGroup: { id: id('azure:network-security-group', names.nsg) },
          },
        ],
      },
    },
    {
      key: 'load-balancer',
      kind: 'azure:load-balancer',
      name: names.lb,
      id: lbId,
      dependsOn: ['public-ip:lb'],
      body: {
        location,
        tags,
        sku: { name: 'Standard', tier: 'Regional' },
        frontendIPConfigurations: [{ name: FRONTEND_NAME, publicIPAddress: { id: id('azure:public-ip', names.lbIp) } }],
        backendAddressPools: [{ name: BACKEND_POOL_NAME }],
        probes: CLUSTER_PORTS.map(({ name, port, probe }) => ({
          name: `probe-${name}`,
          ...probe,
          port,
          intervalInSeconds: 5,
          numberOfProbes: 2,
        })),
        loadBalancingRules: CLUSTER_PORTS.map(({ name, port }) => ({
          name: `rule-${name}`,
          protocol: 'Tcp',
          frontendPort: port,
          backendPort: port,
          idleTimeoutInMinutes: 10,
          disableOutboundSnat: true,
          frontendIPConfiguration: { id: frontendId },
          backendAddressPool: { id: backendPoolId },
          probe: { id: `${lbId}/probes/probe-${name}` },
        })),
      },
    },
  ];

  for (const group of request.nodeGroups) {
    const name = `${base}-${dnsSafe(group.name, 24)}`;
    plan.push({
      key: `vmss:${group.name}`,
      kind: 'azure:vmss',
      name,
      id: id('azure:vmss', name),
      nodeGroup: group.name,
      role: group.role,
      dependsOn: ['vnet', 'load-balancer'],
      body: (sshPublicKey) =>
        scaleSetBody({ request, config, group, name, tags, security, image, subnetId, backendPoolId, sshPublicKey }),
    });
  }
  return plan;
}

function scaleSetBody(p: {
  request: CreateRequest;
  config: AzureConfig;
  group: NodeGroupSpec;
  name: string;
  tags: Record<string, string>;
  security: ReturnType<typeof securitySettings>;
  image: ReturnType<typeof imageReference>;
  subnetId: string;
  backendPoolId: string;
  sshPublicKey: string;
}): VirtualMachineScaleSet {
  const { request, config, group, security } = p;
  return {
    location: config.location,
    tags: {
      ...p.tags,
      [TAG_ROLE]: group.role,
      [TAG_NODE_GROUP]: group.name,
      [TAG_INIT_SECRET_HASH]: request.initSecretHash,
      [TAG_JOIN_SERVICE_KEY]: request.joinServiceKey,
    },
    ...(group.zone ? { zones: [group.zone] } : {}),
    sku: { name: group.instanceType, tier: 'Standard', capacity: group.initialCount },
    identity: { type: 'UserAssigned', userAssignedIdentities: { [config.userAssignedIdentity]: {} } },
    // Uniform: every VM from the one model, which addInstance changes (image) before raising the capacity; Manual:
    // a changed model never reaches running VMs by itself (upgrades replace them one at a time).
    orchestrationMode: 'Uniform',
    upgradePolicy: { mode: 'Manual' },
    overprovision: false,
    virtualMachineProfile: {
      osProfile: {
        computerNamePrefix: p.name.slice(0, 58),
        adminUsername: 'constell',
        // The node image runs no Azure guest agent and takes no extensions (upstream's scale sets: provision_vm_agent
        // and extension_operations_enabled false); the node program reports Ready to the wire server instead.
        allowExtensionOperations: false,
        linuxConfiguration: {
          provisionVMAgent: false,
          disablePasswordAuthentication: true,
          ssh: { publicKeys: [{ path: '/home/constell/.ssh/authorized_keys', keyData: p.sshPublicKey }] },
        },
      },
      storageProfile: {
        imageReference: p.image,
        osDisk: {
          createOption: 'FromImage',
          caching: 'ReadWrite',
          managedDisk: {
            storageAccountType: 'Premium_LRS',
            ...(security.securityEncryptionType
              ? { securityProfile: { securityEncryptionType: security.securityEncryptionType } }
              : {}),
          },
        },
        dataDisks: [
          {
            lun: 0,
            name: 'state-disk',
            createOption: 'Empty',
            caching: 'ReadWrite',
            diskSizeGB: group.stateDiskSizeGB,
            managedDisk: { storageAccountType: group.stateDiskType },
          },
        ],
      },
      networkProfile: {
        networkInterfaceConfigurations: [
          {
            name: 'node-nic',
            primary: true,
            enableIPForwarding: true,
            ipConfigurations: [
              {
                name: 'node-ip',
                primary: true,
                subnet: { id: p.subnetId },
                loadBalancerBackendAddressPools: group.role === 'control-plane' ? [{ id: p.backendPoolId }] : [],
              },
            ],
          },
        ],
      },
      securityProfile: {
        securityType: security.securityType,
        uefiSettings: { vTpmEnabled: true, secureBootEnabled: config.secureBoot },
      },
      diagnosticsProfile: { bootDiagnostics: { enabled: true } },
    },
  };
}
