/** Shared inputs of the Azure provider tests: a create request for a small SEV-SNP cluster. */
import type { CreateRequest } from '../../../providers/contract.js';

export const SUBSCRIPTION = '00000000-1111-2222-3333-444444444444';
export const RESOURCE_GROUP = 'constell-rg';
export const IDENTITY = `/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/constell-nodes`;
export const INIT_SECRET_HASH = '$2a$10$abcdefghijklmnopqrstuu5GcOQzq3nXfR2mP1d1nT9kY2W0w8m2';
/** A join-service identity key (public, base64) as `create` publishes it. */
export const JOIN_SERVICE_KEY = Buffer.alloc(32, 7).toString('base64');

export function createRequest(overrides: Partial<CreateRequest> = {}): CreateRequest {
  return {
    uid: 'a1b2c3d4',
    name: 'demo',
    image: '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.19.0',
    kubernetesVersion: 'v1.30.0',
    attestationVariant: 'azure-sev-snp',
    initSecretHash: INIT_SECRET_HASH,
    joinServiceKey: JOIN_SERVICE_KEY,
    tags: { team: 'platform' },
    nodeGroups: [
      {
        name: 'control_plane_default',
        role: 'control-plane',
        zone: '',
        instanceType: 'Standard_DC4as_v5',
        stateDiskSizeGB: 30,
        stateDiskType: 'Premium_LRS',
        initialCount: 3,
      },
      {
        name: 'worker_default',
        role: 'worker',
        zone: '',
        instanceType: 'Standard_DC4as_v5',
        stateDiskSizeGB: 30,
        stateDiskType: 'StandardSSD_LRS',
        initialCount: 2,
      },
    ],
    providerConfig: {
      subscription: SUBSCRIPTION,
      tenant: '72f988bf-0000-0000-0000-000000000001',
      location: 'westeurope',
      resourceGroup: RESOURCE_GROUP,
      userAssignedIdentity: IDENTITY,
      deployCSIDriver: false,
      secureBoot: false,
    },
    ...overrides,
  };
}
