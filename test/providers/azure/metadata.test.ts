/**
 * Node-side Azure metadata: self and the init-secret hash from a fake instance metadata service, peers and the
 * load balancer from the fake ARM, for a cluster that the infrastructure provider created there.
 */
import assert from 'node:assert/strict';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { AzureNodeMetadata } from '../../../providers/azure/metadata.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { baseName } from '../../../providers/azure/plan.js';
import type { CreateResult, Instance } from '../../../providers/contract.js';
import { FakeArm, FAKE_TOKEN } from '../../fakes/azure/arm-server.js';
import { startFakeImds, type FakeImds } from '../../fakes/azure/imds-server.js';
import { testContext } from './context.js';
import {
  createRequest,
  IDENTITY,
  INIT_SECRET_HASH,
  JOIN_SERVICE_KEY,
  RESOURCE_GROUP,
  SUBSCRIPTION,
} from './fixtures.js';

describe('azure node metadata (fake IMDS and ARM)', function () {
  let fake: FakeArm;
  let imds: FakeImds;
  let created: CreateResult;
  let instances: Instance[];
  let metadata: AzureNodeMetadata;

  before(async function () {
    fake = await FakeArm.start();
    fake.seed(`/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`, {
      location: 'westeurope',
      properties: { provisioningState: 'Succeeded' },
    });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
    const ctx = testContext();
    created = await infra.create(createRequest(), ctx);
    instances = await infra.listInstances(ctx);
    const me = instances.find((i) => i.role === 'worker')!;
    const scaleSet = fake.get(me.id.replace(/\/virtualMachines\/.*$/, '')) as { tags: Record<string, string> };
    imds = await startFakeImds({
      name: me.id.split('/')[8] + '_' + me.id.split('/').pop(),
      computerName: me.name,
      resourceId: me.id,
      subscriptionId: SUBSCRIPTION,
      resourceGroupName: RESOURCE_GROUP,
      tags: scaleSet.tags,
      privateIp: me.privateIp,
    });
    metadata = new AzureNodeMetadata(parseAzureOptions(fake.providerOptions({ imdsEndpoint: imds.url })));
  });

  after(async function () {
    await imds?.stop();
    await fake?.stop();
  });

  it('reads self and the init secret hash from IMDS, with the Metadata header', async function () {
    const me = instances.find((i) => i.role === 'worker')!;
    assert.deepEqual(await metadata.self(), {
      name: me.name,
      providerId: `azure://${me.id}`,
      role: 'worker',
      vpcIp: me.privateIp,
    });
    assert.equal(await metadata.initSecretHash(), INIT_SECRET_HASH);
    assert.equal(await metadata.joinServiceKey(), JOIN_SERVICE_KEY);
    assert.ok(imds.requests.length > 0 && imds.requests.every((r) => r.metadataHeader === 'true'));
  });

  it('names the VM for its attestation (resource id, vmId) and gives the cloud controller manager its values', async function () {
    const me = instances.find((i) => i.role === 'worker')!;
    assert.deepEqual(await metadata.vmIdentity(), { resourceId: me.id, vmId: '00000000-0000-4000-8000-0000000000a1' });
    assert.deepEqual(await metadata.cloudControllerValues(), {
      cloud: 'azure',
      subscriptionId: SUBSCRIPTION,
      resourceGroup: RESOURCE_GROUP,
      location: 'westeurope',
      securityGroupName: `${baseName(createRequest())}-nsg`,
    });
  });

  it("authenticates to ARM as the VM's managed identity, with a token from IMDS; without an identity it says what to fix", async function () {
    const me = instances.find((i) => i.role === 'worker')!;
    const set = fake.get(me.id.replace(/\/virtualMachines\/.*$/, '')) as {
      tags: Record<string, string>;
      identity?: { type: string; userAssignedIdentities: Record<string, unknown> };
    };
    assert.equal(set.identity?.type, 'UserAssigned', 'the scale set carries the user-assigned identity');
    assert.deepEqual(Object.keys(set.identity!.userAssignedIdentities), [IDENTITY]);
    const vm = {
      name: 'vm',
      computerName: me.name,
      resourceId: me.id,
      subscriptionId: SUBSCRIPTION,
      resourceGroupName: RESOURCE_GROUP,
      tags: set.tags,
      privateIp: me.privateIp,
    };
    const { credential: _ignored, ...withoutCredential } = fake.providerOptions();
    const withIdentity = await startFakeImds({ ...vm, managedIdentity: { token: FAKE_TOKEN } });
    const without = await startFakeImds(vm);
    try {
      const peers = await new AzureNodeMetadata(
        parseAzureOptions({ ...withoutCredential, imdsEndpoint: withIdentity.url }),
      ).peers();
      assert.equal(peers.length, instances.length, "ARM accepted the managed identity's token");
      assert.ok(
        withIdentity.tokenRequests.length >= 1 &&
          withIdentity.tokenRequests.every(
            (r) => r.resource === 'https://management.azure.com/' && r.apiVersion === '2018-02-01',
          ),
      );
      assert.ok(withIdentity.requests.every((r) => r.metadataHeader === 'true'));
      await assert.rejects(
        new AzureNodeMetadata(parseAzureOptions({ ...withoutCredential, imdsEndpoint: without.url })).peers(),
        (err: Error) =>
          /refused a managed-identity token for https:\/\/management\.azure\.com\/: 400 Identity not found/.test(
            err.message,
          ) && /userAssignedIdentity/.test((err as { hint?: string }).hint ?? ''),
      );
    } finally {
      await withIdentity.stop();
      await without.stop();
    }
  });

  it('lists every VM of the cluster as peers, with roles and private IPs', async function () {
    const peers = await metadata.peers();
    assert.deepEqual(
      peers.map((p) => [p.providerId, p.role, p.vpcIp]).sort(),
      instances.map((i) => [`azure://${i.id}`, i.role, i.privateIp]).sort(),
    );
  });

  it("finds the load balancer's public address by the uid tag", async function () {
    assert.equal(await metadata.loadBalancerEndpoint(), created.clusterEndpoint);
  });

  it('fails clearly off Azure (no metadata service)', async function () {
    const offAzure = new AzureNodeMetadata(parseAzureOptions({ imdsEndpoint: 'http://127.0.0.1:9' }));
    await assert.rejects(offAzure.self(), /instance metadata service .* is not reachable/);
  });
});
