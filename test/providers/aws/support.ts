/** Shared setup of the AWS provider tests: a fake AWS, provider options pointing the SDK at it, a request. */
import type { CreateRequest, ProviderContext, ProviderLogger } from '../../../providers/contract.js';
import type { AwsProviderOptions } from '../../../providers/aws/options.js';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';
import { FAKE_CREDENTIALS, FAKE_IMAGE, type FakeAws } from '../../fakes/aws/server.js';

export function fakeOptions(fake: FakeAws, extra: Partial<AwsProviderOptions> = {}): AwsProviderOptions {
  return {
    endpoint: fake.url,
    credentials: FAKE_CREDENTIALS,
    retryDelayMs: 5,
    waiter: { minDelaySeconds: 0.005, maxDelaySeconds: 0.01, maxWaitSeconds: 30 },
    pollIntervalMs: 5,
    dependencyRetries: 200,
    imdsEndpoint: fake.url,
    ...extra,
  };
}

export const quietLog: ProviderLogger = { debug: () => undefined, info: () => undefined, warn: () => undefined };

export function context(
  journal = new MemoryResourceJournal(),
  extra: Partial<ProviderContext> = {},
): ProviderContext & { journal: MemoryResourceJournal } {
  return { journal, log: quietLog, workspaceDir: '/nonexistent', ...extra } as ProviderContext & {
    journal: MemoryResourceJournal;
  };
}

export const INIT_SECRET_HASH = '$2b$10$abcdefghijklmnopqrstuu5Yx8PjBQ5GQ0hZyq7k0V0eW3sC0WJ9C';
/** A join-service identity key (public, base64) as `create` publishes it. */
export const JOIN_SERVICE_KEY = Buffer.alloc(32, 7).toString('base64');

export function createRequest(overrides: Partial<CreateRequest> = {}): CreateRequest {
  return {
    uid: 'a1b2c3d4',
    name: 'demo',
    image: FAKE_IMAGE,
    kubernetesVersion: 'v1.31.1',
    attestationVariant: 'aws-sev-snp',
    initSecretHash: INIT_SECRET_HASH,
    joinServiceKey: JOIN_SERVICE_KEY,
    tags: { team: 'blue' },
    providerConfig: {
      region: 'us-east-2',
      zone: 'us-east-2a',
      iamProfileControlPlane: 'demo-control-plane-profile',
      iamProfileWorkerNodes: 'demo-worker-profile',
      deployCSIDriver: false,
    },
    nodeGroups: [
      {
        name: 'control_plane_default',
        role: 'control-plane',
        zone: 'us-east-2a',
        instanceType: 'm6a.xlarge',
        stateDiskSizeGB: 30,
        stateDiskType: 'gp3',
        initialCount: 3,
      },
      {
        name: 'worker_default',
        role: 'worker',
        zone: 'us-east-2a',
        instanceType: 'm6a.xlarge',
        stateDiskSizeGB: 50,
        stateDiskType: 'gp3',
        initialCount: 2,
      },
    ],
    ...overrides,
  };
}
