/**
 * `npm run bench create-azure`: Azure create against the fake ARM with a fixed latency per call and a fixed
 * duration per long-running operation, next to the critical path computed from the same latencies over the
 * provider's own dependency plan. Target: wall time <= 1.3x the critical path.
 *
 * Cost model of the critical path (a lower bound): looking up the existing resource group is one call (L);
 * every other resource is a PUT (L), its operation (D) and the final read of the resource (L). The status polls
 * in between (every POLL ms) are the provider's overhead and count against it.
 */
import { performance } from 'node:perf_hooks';
import { AzureInfrastructure } from '../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../providers/azure/options.js';
import { parseAzureConfig, planResources } from '../providers/azure/plan.js';
import { criticalPath } from '../providers/common/task-graph.js';
import { MemoryResourceJournal } from '../lib/workspace/resource-journal.js';
import type { CreateRequest, ProviderContext } from '../providers/contract.js';
import { FakeArm } from '../test/fakes/azure/arm-server.js';

const LATENCY_MS = 20;
const OPERATION_MS = 300;
const POLL_MS = 10;
const TARGET = 1.3;
const SUBSCRIPTION = '00000000-1111-2222-3333-444444444444';
const RESOURCE_GROUP = 'bench-rg';

function request(uid: string): CreateRequest {
  const group = (name: string, role: 'control-plane' | 'worker', count: number) => ({
    name,
    role,
    zone: '',
    instanceType: 'Standard_DC4as_v5',
    stateDiskSizeGB: 30,
    stateDiskType: 'Premium_LRS',
    initialCount: count,
  });
  return {
    uid,
    name: 'bench',
    image: '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.19.0',
    kubernetesVersion: 'v1.30.0',
    attestationVariant: 'azure-sev-snp',
    initSecretHash: '$2a$10$benchbenchbenchbenchbeu5GcOQzq3nXfR2mP1d1nT9kY2W0w8m2',
    joinServiceKey: Buffer.alloc(32, 7).toString('base64'),
    tags: {},
    nodeGroups: [group('control_plane_default', 'control-plane', 3), group('worker_default', 'worker', 2)],
    providerConfig: {
      subscription: SUBSCRIPTION,
      location: 'westeurope',
      resourceGroup: RESOURCE_GROUP,
      userAssignedIdentity: 'bench-nodes',
    },
  };
}

function context(): ProviderContext {
  const quiet = () => undefined;
  return {
    journal: new MemoryResourceJournal(),
    log: { debug: quiet, info: quiet, warn: quiet },
    workspaceDir: '/nonexistent',
  };
}

export default async function (out: (line: string) => void): Promise<void> {
  const fake = await FakeArm.start({ latencyMs: 0, lroDurationMs: 0 });
  try {
    fake.seed(`/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`, {
      location: 'westeurope',
      properties: { provisioningState: 'Succeeded' },
    });
    fake.seedGalleryImage(
      SUBSCRIPTION,
      'westeurope',
      '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.19.0',
    );
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions({ pollIntervalMs: POLL_MS })));
    // Warm-up without latency: loads the SDK modules, which is not what we measure.
    const warm = context();
    await infra.create(request('warmup'), warm);
    await infra.terminate(warm);

    fake.latencyMs = LATENCY_MS;
    fake.lroDurationMs = OPERATION_MS;
    const req = request('bench01');
    const plan = planResources(req, parseAzureConfig(req.providerConfig));
    const cost = (key: string) => (key === 'resource-group' ? LATENCY_MS : 2 * LATENCY_MS + OPERATION_MS);
    const critical = criticalPath(
      plan.map((p) => ({ id: p.key, dependsOn: p.dependsOn })),
      cost,
    );

    const ctx = context();
    const start = performance.now();
    await infra.create(req, ctx);
    const wall = performance.now() - start;
    const calls = fake.requests.filter((r) => r.path.includes('bench01') || r.path.includes('/operations/')).length;

    const terminateStart = performance.now();
    await infra.terminate(ctx);
    const terminateWall = performance.now() - terminateStart;

    const ratio = wall / critical.length;
    out(
      `azure create, fake ARM with ${LATENCY_MS} ms per call, ${OPERATION_MS} ms per long-running operation, polling every ${POLL_MS} ms`,
    );
    out(
      `  resources: ${plan.length} (${plan.filter((p) => p.kind === 'azure:vmss').length} scale sets), ~${calls} calls`,
    );
    out(`  critical path: ${critical.length.toFixed(0)} ms (${critical.path.join(' -> ')})`);
    out(
      `  wall time:     ${wall.toFixed(0)} ms = ${ratio.toFixed(2)}x the critical path (target <= ${TARGET}x: ${ratio <= TARGET ? 'met' : 'MISSED'})`,
    );
    out(`  terminate:     ${terminateWall.toFixed(0)} ms`);
  } finally {
    await fake.stop();
  }
}
