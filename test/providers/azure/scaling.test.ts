/**
 * Azure as `upgrade apply` and `apply` scale-in use it, against the fake ARM modelling what Azure documents: VMs stay
 * Creating until their guest reports Ready over the wire server (and never provision with the VM agent left on), a
 * capacity change deletes the VMs the scale-in policy picks, deleting one VM lowers the capacity, a VM's own network
 * configuration takes it out of the backend pool. Each `it` makes its own cluster.
 */
import assert from 'node:assert/strict';
import { pollUntil } from '../../../lib/poll.js';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { createAzureClients } from '../../../providers/azure/clients.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { reportReady } from '../../../providers/azure/wire-server.js';
import { FakeArm } from '../../fakes/azure/arm-server.js';
import { testContext } from './context.js';
import { createRequest, INIT_SECRET_HASH, RESOURCE_GROUP, SUBSCRIPTION } from './fixtures.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const RG_ID = `/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`;
const NEW_IMAGE = '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.20.0';
const POOL = `${RG_ID}/providers/Microsoft.Network/loadBalancers/demo-a1b2c3d4-lb/backendAddressPools/control-plane`;

describe('azure single instances: add, drain, remove, initialized (fake ARM)', function () {
  this.timeout(30_000);
  let fake: FakeArm;
  let infra: AzureInfrastructure;

  beforeEach(async function () {
    fake = await FakeArm.start({ lroDurationMs: 1 });
    fake.seed(RG_ID, { location: 'westeurope', properties: { provisioningState: 'Succeeded' } });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions({ image: NEW_IMAGE })));
  });
  afterEach(async function () {
    await fake.stop();
  });

  const capacity = (group: string) =>
    (fake.get(`${RG_ID}/providers/Microsoft.Compute/virtualMachineScaleSets/demo-a1b2c3d4-${group}`) as Json).sku
      .capacity;

  it('sets provisionVMAgent false, extension operations off and orchestrationMode Uniform on every scale set (as upstream)', async function () {
    await infra.create(createRequest(), testContext());
    for (const put of fake.requests.filter(
      (r) => r.method === 'PUT' && /virtualMachineScaleSets\/[^/]+$/.test(r.path),
    )) {
      const props = (put.body as Json).properties;
      assert.equal(props.orchestrationMode, 'Uniform');
      assert.equal(props.virtualMachineProfile.osProfile.linuxConfiguration.provisionVMAgent, false);
      assert.equal(props.virtualMachineProfile.osProfile.allowExtensionOperations, false);
    }
  });

  it('refuses an image not marked for confidential VMs before making anything', async function () {
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image, 'TrustedLaunchSupported');
    await assert.rejects(
      infra.create(createRequest(), testContext()),
      /not marked for confidential VMs \(its SecurityType is TrustedLaunchSupported\)/,
    );
    await assert.rejects(
      infra.create(
        createRequest({
          image: `/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}/providers/Microsoft.Compute/images/plain`,
        }),
        testContext(),
      ),
      /is not a gallery image/,
    );
    await assert.rejects(
      infra.create(
        createRequest({ image: '/CommunityGalleries/nope/Images/constellation/Versions/1.0.0' }),
        testContext(),
      ),
      /does not exist in westeurope/,
    );
    assert.equal(fake.requests.filter((r) => r.method === 'PUT').length, 0);
  });

  it('adds one VM with the configured image (running VMs keep theirs) and returns it once Azure reports it provisioned', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    fake.vmBootMs = 40;
    const added = await infra.addInstance('worker_default', ctx);
    assert.equal(added.state, 'running');
    assert.equal(added.image, NEW_IMAGE);
    assert.ok(added.createdAt);
    assert.equal(capacity('worker-default'), 3);
    const others = (await infra.listInstances(ctx)).filter((i) => i.role === 'worker' && i.id !== added.id);
    assert.deepEqual(
      others.map((i) => i.image),
      [createRequest().image, createRequest().image],
    );
  });

  it('removes exactly the chosen VM, and the capacity goes down by one', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    const before = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    // Not the one Azure's scale-in policy would pick (the highest instance id).
    const victim = before[0]!;
    await infra.removeInstance(victim.id, ctx);
    const after = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    assert.deepEqual(
      after.map((i) => i.id),
      before.slice(1).map((i) => i.id),
    );
    assert.equal(capacity('control-plane-default'), 2);
    await infra.removeInstance(victim.id, ctx);
    assert.equal(capacity('control-plane-default'), 2);
  });

  it('drains a VM out of the backend pool while it keeps running, then removes it', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    const cps = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    assert.equal(fake.backendPoolMembers(POOL).length, 3);
    await infra.drainInstance(cps[1]!.id, ctx);
    assert.deepEqual(
      fake
        .backendPoolMembers(POOL)
        .map((m) => m.id)
        .sort(),
      [cps[0]!.id, cps[2]!.id].sort(),
    );
    assert.equal((await infra.listInstances(ctx)).find((i) => i.id === cps[1]!.id)?.state, 'running');
    await infra.drainInstance(cps[1]!.id, ctx);
    await infra.removeInstance(cps[1]!.id, ctx);
    assert.equal(fake.backendPoolMembers(POOL).length, 2);
  });

  it('once initialized, no scale set carries the init-secret hash tag, so no VM added later does', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    await infra.markInitialized(ctx);
    for (const group of ['control-plane-default', 'worker-default']) {
      const tags = (
        fake.get(`${RG_ID}/providers/Microsoft.Compute/virtualMachineScaleSets/demo-a1b2c3d4-${group}`) as Json
      ).tags;
      assert.equal(tags['constellation-init-secret-hash'], undefined);
      assert.ok(tags['constellation-join-service-key']);
    }
    assert.ok(!JSON.stringify([...fake.resources.values()]).includes(INIT_SECRET_HASH));
  });
});

describe('the fake ARM scale set (as Azure documents it)', function () {
  this.timeout(30_000);
  let fake: FakeArm;
  beforeEach(async function () {
    fake = await FakeArm.start({ lroDurationMs: 1, vmReady: 'wire-server', provisioningTimeoutMs: 1500 });
    fake.seed(RG_ID, { location: 'westeurope', properties: { provisioningState: 'Succeeded' } });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
  });
  afterEach(async function () {
    await fake.stop();
  });

  const vms = () =>
    [...fake.resources.values()].filter((r) => /\/virtualMachines\/[^/]+$/.test(r.id)).map((r) => r.body as Json);

  it('keeps a VM Creating until its guest reports Ready to the wire server; the scale set is done only then', async function () {
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
    const request = createRequest({ nodeGroups: [{ ...createRequest().nodeGroups[0]!, initialCount: 1 }] });
    const created = infra.create(request, testContext());
    let settled = false;
    void created.then(
      () => (settled = true),
      () => (settled = true),
    );
    await pollUntil(() => (vms().length > 0 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 10,
      what: "the scale set's VM",
    });
    // The provider still waits: it asks Azure again (twice) and the VM is still Creating.
    const asked = fake.requests.length;
    await pollUntil(() => (fake.requests.length >= asked + 2 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 10,
      what: 'two more requests',
    });
    assert.equal(vms()[0]!.properties.provisioningState, 'Creating');
    assert.equal(settled, false, 'create waits for the VM');
    await reportReady(`${fake.wireServerUrl}/node/${vms()[0]!.properties.osProfile.computerName}`, { attempts: 1 });
    await created;
    assert.equal(vms()[0]!.properties.provisioningState, 'Succeeded');
  });

  it('never provisions a VM whose scale set leaves the VM agent on (the node image runs none): OSProvisioningTimedOut', async function () {
    // A guest that reports Ready at once: with the agent on, Azure still waits for the agent's provisioning.
    fake.vmReady = 'at-boot';
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
    const request = createRequest({ nodeGroups: [{ ...createRequest().nodeGroups[0]!, initialCount: 1 }] });
    await infra.create(request, testContext());
    const clients = await createAzureClients(SUBSCRIPTION, parseAzureOptions(fake.providerOptions()));
    const name = 'demo-a1b2c3d4-control-plane-default';
    const model = await clients.compute.virtualMachineScaleSets.get(RESOURCE_GROUP, name);
    model.virtualMachineProfile!.osProfile!.linuxConfiguration!.provisionVMAgent = true;
    model.sku!.capacity = 2;
    const put = clients.compute.virtualMachineScaleSets.createOrUpdate(RESOURCE_GROUP, name, model, {
      updateIntervalInMs: 5,
    });
    await assert.rejects(put, /OSProvisioningTimedOut|did not finish in the allotted time/);
  });

  it('deletes the highest instance ids when the capacity goes down (the Default scale-in policy)', async function () {
    fake.vmReady = 'at-boot';
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    const before = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane').map((i) => i.id);
    await infra.scaleNodeGroup('control_plane_default', 2, ctx);
    const after = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane').map((i) => i.id);
    assert.deepEqual(
      after,
      before.filter((id) => !id.endsWith('/virtualMachines/2')),
    );
  });
});
