/**
 * Shared fixtures of the GCP provider tests: a create request for the fake project, a provider context with
 * an in-memory journal and a collecting logger, and the fake GCP's lifecycle.
 */
import type { CreateRequest, ProviderContext } from '../../../providers/contract.js';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';

export const PROJECT = 'fake-project';
export const REGION = 'europe-west3';
export const ZONE = 'europe-west3-b';

/** bcrypt-shaped; the real one is made by the CLI from the init secret. */
export const INIT_SECRET_HASH = '$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy';
/** A join-service identity key (public, base64) as `create` publishes it. */
export const JOIN_SERVICE_KEY = Buffer.alloc(32, 7).toString('base64');

export function createRequest(overrides: Partial<CreateRequest> = {}): CreateRequest {
  return {
    uid: 'a1b2c3d4',
    name: 'testcluster',
    image: 'projects/constellation-images/global/images/constellation-v2-18-0',
    kubernetesVersion: 'v1.31.1',
    attestationVariant: 'gcp-sev-snp',
    initSecretHash: INIT_SECRET_HASH,
    joinServiceKey: JOIN_SERVICE_KEY,
    tags: { team: 'Platform' },
    providerConfig: {
      project: PROJECT,
      region: REGION,
      zone: ZONE,
      IAMServiceAccountVM: 'vm@fake-project.iam.gserviceaccount.com',
    },
    nodeGroups: [
      {
        name: 'control_plane_default',
        role: 'control-plane',
        zone: ZONE,
        instanceType: 'n2d-standard-4',
        stateDiskSizeGB: 30,
        stateDiskType: 'pd-ssd',
        initialCount: 3,
      },
      {
        name: 'worker_default',
        role: 'worker',
        zone: ZONE,
        instanceType: 'n2d-standard-4',
        stateDiskSizeGB: 50,
        stateDiskType: 'pd-balanced',
        initialCount: 2,
      },
    ],
    ...overrides,
  };
}

export interface TestContext extends ProviderContext {
  journal: MemoryResourceJournal;
  messages: string[];
}

export function providerContext(journal = new MemoryResourceJournal(), signal?: AbortSignal): TestContext {
  const messages: string[] = [];
  const log = (msg: string, fields?: Record<string, unknown>) =>
    messages.push(fields ? `${msg} ${JSON.stringify(fields)}` : msg);
  return {
    journal,
    messages,
    log: { debug: log, info: log, warn: log },
    progress: (m) => messages.push(m),
    workspaceDir: '/nonexistent-workspace',
    signal,
  };
}
