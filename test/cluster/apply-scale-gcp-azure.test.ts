/**
 * `apply` scaling on GCP and Azure against their fakes (real SDKs, fakes at the wire): scale-out grows the group
 * (resize / capacity), scale-in removes exactly the nodes `apply` chose (the newest by the creation time the cloud
 * reports), never the ones the cloud would pick when the group's size is lowered (GCP: "arbitrarily", Azure's
 * scale-in policy: the highest instance id), for workers and control planes (3 → 5 → 3). Init is skipped: no etcd
 * member leaves here.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { applyConfig } from '../../cli/cluster/apply.js';
import { createCluster } from '../../cli/cluster/create.js';
import { newestFirst } from '../../cli/cluster/newest-first.js';
import { generateConfigFiles } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { AzureInfrastructure } from '../../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../../providers/azure/options.js';
import type { InfrastructureProvider } from '../../providers/contract.js';
import { GcpInfrastructure } from '../../providers/gcp/infrastructure.js';
import { FakeArm, FAKE_TENANT } from '../fakes/azure/arm-server.js';
import { FakeGcp } from '../fakes/gcp/server.js';
import { fillImageMeasurements } from '../support/image-measurements.js';
import { tempDir } from './support/workspace.js';

type Doc = ReturnType<typeof parseDocument>;

async function editConfig(ws: string, edit: (doc: Doc) => void): Promise<void> {
  const file = path.join(ws, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  edit(doc);
  await fs.writeFile(file, doc.toString({ lineWidth: 0 }));
}

const AZ_SUBSCRIPTION = '00000000-1111-2222-3333-444444444444';
const AZ_GROUP = 'apply-rg';
const AZ_IMAGE = '/CommunityGalleries/box/Images/constellation/Versions/1.0.0';

interface Cloud {
  name: 'gcp' | 'azure';
  configure(doc: Doc): void;
  infra: InfrastructureProvider;
  /** The instance ids the provider removed one by one (deleteInstances / VM DELETE). */
  removed(): string[];
  /** Whether any call lowered a group's size to let the cloud choose. */
  loweredSize(): boolean;
  close(): Promise<void>;
}

async function gcp(): Promise<Cloud> {
  const fake = await FakeGcp.start({ operationMs: 2 });
  return {
    name: 'gcp',
    configure(doc) {
      doc.setIn(['image'], 'projects/box/global/images/constellation-box');
      doc.setIn(['provider', 'gcp', 'project'], 'box-project');
      doc.setIn(['provider', 'gcp', 'serviceAccountKeyPath'], 'gcp-key.json');
      doc.setIn(['provider', 'gcp', 'IAMServiceAccountVM'], 'vm@box-project.iam.gserviceaccount.com');
    },
    infra: new GcpInfrastructure(fake.providerOptions()),
    // Drained first (abandonInstances: out of the group), then deleted (instances.delete), or deleteInstances.
    removed: () => [
      ...fake
        .calls(/\/deleteInstances$/)
        .flatMap((c) => (c.body as { instances: string[] }).instances)
        .map((u) => u.slice(u.indexOf('projects/'))),
      ...fake.calls(/^DELETE .*\/instances\/[^/]+$/).map((c) => c.path.slice(c.path.indexOf('projects/'))),
    ],
    loweredSize: () =>
      fake.calls(/\/resize$/).length > 0 &&
      fake.calls(/\/resize$/).some((c) => Number(c.query.size) < 5 && Number(c.query.size) !== 3),
    close: () => fake.close(),
  };
}

async function azure(): Promise<Cloud> {
  const fake = await FakeArm.start({ lroDurationMs: 1 });
  fake.seed(`/subscriptions/${AZ_SUBSCRIPTION}/resourceGroups/${AZ_GROUP}`, {
    location: 'westus',
    properties: { provisioningState: 'Succeeded' },
  });
  fake.seedGalleryImage(AZ_SUBSCRIPTION, 'westus', AZ_IMAGE);
  return {
    name: 'azure',
    configure(doc) {
      doc.setIn(['image'], AZ_IMAGE);
      doc.setIn(['provider', 'azure', 'subscription'], AZ_SUBSCRIPTION);
      doc.setIn(['provider', 'azure', 'tenant'], FAKE_TENANT);
      doc.setIn(['provider', 'azure', 'resourceGroup'], AZ_GROUP);
      doc.setIn(
        ['provider', 'azure', 'userAssignedIdentity'],
        `/subscriptions/${AZ_SUBSCRIPTION}/resourceGroups/${AZ_GROUP}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/nodes`,
      );
    },
    infra: new AzureInfrastructure(parseAzureOptions(fake.providerOptions())),
    removed: () =>
      fake.requests.filter((r) => r.method === 'DELETE' && /\/virtualMachines\/[^/]+$/.test(r.path)).map((r) => r.path),
    loweredSize: () =>
      fake.requests.some(
        (r) =>
          r.method === 'PATCH' &&
          ((r.body as { sku?: { capacity?: number } } | undefined)?.sku?.capacity ?? 99) < 5 &&
          (r.body as { sku: { capacity: number } }).sku.capacity !== 3,
      ),
    close: () => fake.stop(),
  };
}

for (const make of [gcp, azure]) {
  describe(`apply: scaling on ${make.name}`, function () {
    this.timeout(60_000);
    let cloud: Cloud;
    let ws: string;
    let journal: MemoryResourceJournal;

    beforeEach(async () => {
      journal = new MemoryResourceJournal();
      cloud = await make();
      ws = await tempDir(`apply-${cloud.name}-`);
      await generateConfigFiles(ws, cloud.name);
      await fillImageMeasurements(ws);
      await editConfig(ws, (doc) => {
        cloud.configure(doc);
        doc.setIn(['nodeGroups', 'control_plane_default', 'initialCount'], 3);
        doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], 3);
      });
      await createCluster({ workspaceDir: ws, provider: cloud.infra, journal, log: nullLogger });
    });
    afterEach(async () => {
      await cloud.close();
      await fs.rm(ws, { recursive: true, force: true });
    });

    const members = async (group: string) =>
      (await cloud.infra.listInstances({ journal, log: nullLogger, workspaceDir: ws })).filter(
        (i) => i.nodeGroup === group,
      );
    const apply = () =>
      applyConfig({
        workspaceDir: ws,
        log: nullLogger,
        journal,
        provider: cloud.infra,
        skip: new Set(['init', 'attestationconfig', 'image', 'k8s']),
      });

    for (const group of ['worker_default', 'control_plane_default']) {
      it(`scales ${group} 3 → 5 → 3: exactly the two newest go, the group's size is never lowered for the cloud to choose`, async () => {
        await editConfig(ws, (doc) => doc.setIn(['nodeGroups', group, 'initialCount'], 5));
        assert.deepEqual((await apply()).scaled, { [group]: [3, 5] });
        const five = await members(group);
        assert.equal(five.length, 5);
        assert.ok(five.every((i) => i.createdAt && i.state === 'running'));
        const newest = newestFirst(five)
          .slice(0, 2)
          .map((i) => i.id);

        await editConfig(ws, (doc) => doc.setIn(['nodeGroups', group, 'initialCount'], 3));
        assert.deepEqual((await apply()).scaled, { [group]: [5, 3] });
        assert.deepEqual(
          cloud
            .removed()
            .map((id) => id.toLowerCase())
            .sort(),
          newest.map((id) => id.toLowerCase()).sort(),
        );
        assert.deepEqual(
          (await members(group)).map((i) => i.id).sort(),
          five
            .map((i) => i.id)
            .filter((id) => !newest.includes(id))
            .sort(),
        );
        assert.equal(cloud.loweredSize(), false);
      });
    }
  });
}
