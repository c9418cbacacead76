/**
 * The Azure infrastructure provider, with the unmodified Azure SDKs talking HTTPS to a fake Azure Resource
 * Manager on 127.0.0.1: what create sends (confidential settings, tags, ports, disks), idempotence and
 * continuation, throttling, Azure's errors, and terminate leaving nothing behind.
 */
import assert from 'node:assert/strict';
import { CreateFailedError } from '../../../providers/azure/errors.js';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { UserError } from '../../../lib/errors.js';
import { FakeArm, type LoggedRequest } from '../../fakes/azure/arm-server.js';
import { testContext } from './context.js';
import {
  createRequest,
  IDENTITY,
  INIT_SECRET_HASH,
  JOIN_SERVICE_KEY,
  RESOURCE_GROUP,
  SUBSCRIPTION,
} from './fixtures.js';

const RG_ID = `/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`;
const PORTS = [6443, 9000, 30090, 30081, 9999];

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function lastPut(fake: FakeArm, fragment: string): Json {
  const puts = fake.find('PUT', fragment);
  assert.ok(puts.length > 0, `no PUT for ${fragment}`);
  return puts.at(-1)!.body as Json;
}

describe('azure infrastructure (fake ARM)', function () {
  let fake: FakeArm;
  let infra: AzureInfrastructure;

  beforeEach(async function () {
    fake = await FakeArm.start();
    fake.seed(RG_ID, { location: 'westeurope', properties: { provisioningState: 'Succeeded' } });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    // Constructed directly; index.test.ts covers loading through the provider registry.
    infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
  });

  afterEach(async function () {
    await fake.stop();
  });

  it('registers the subscription for the resource providers it needs first, and waits until they are registered', async function () {
    // A fresh subscription: ARM refuses these namespaces' resources with MissingSubscriptionRegistration.
    fake.unregister('Microsoft.Compute', 'Microsoft.Network', 'Microsoft.ManagedIdentity');
    fake.registrationMs = 40;
    const slept: number[] = [];
    const registering = new AzureInfrastructure(
      parseAzureOptions(
        fake.providerOptions({
          registrationPollMs: 10,
          sleep: async (ms: number) => {
            slept.push(ms);
            await new Promise((r) => setTimeout(r, ms));
          },
        }),
      ),
    );
    const ctx = testContext();
    await registering.create(createRequest(), ctx);
    assert.deepEqual(
      fake
        .find('POST', '/register')
        .map((r) => r.path.split('/')[4])
        .sort(),
      ['Microsoft.Compute', 'Microsoft.ManagedIdentity', 'Microsoft.Network'],
    );
    const firstPut = fake.requests.findIndex((r) => r.method === 'PUT');
    const lastRegistrationRead = fake.requests
      .map((r) => r.method === 'GET' && /\/providers\/Microsoft\.[A-Za-z]+$/.test(r.path))
      .lastIndexOf(true);
    assert.ok(lastRegistrationRead < firstPut, 'every namespace was registered before the first resource');
    assert.ok(slept.length > 0 && slept.every((ms) => ms === 10), 'it polled on the given interval');
    assert.ok(ctx.messages.includes('registering the resource provider Microsoft.Network with the subscription'));
    assert.equal(fake.requests.filter((r) => r.method === 'PUT' && fake.get(r.path) === undefined).length, 0);
    await registering.terminate(ctx);
  });

  it('asks nothing to be registered when the subscription already is', async function () {
    await infra.create(createRequest(), testContext());
    assert.equal(fake.find('POST', '/register').length, 0);
    assert.equal(
      fake.requests.filter((r) => r.method === 'GET' && /\/providers\/Microsoft\.[A-Za-z]+$/.test(r.path)).length,
      3,
    );
  });

  it('creates the cluster with confidential scale sets, tags, load-balanced ports and state disks', async function () {
    const ctx = testContext();
    const result = await infra.create(createRequest(), ctx);

    const lbIp = fake.get(`${RG_ID}/providers/Microsoft.Network/publicIPAddresses/demo-a1b2c3d4-lb-ip`) as Json;
    assert.equal(result.clusterEndpoint, lbIp.properties.ipAddress);
    assert.deepEqual(result.apiServerCertSANs, [result.clusterEndpoint]);
    assert.equal(result.providerState.resourceGroup, RESOURCE_GROUP);

    const cp = lastPut(fake, 'virtualMachineScaleSets/demo-a1b2c3d4-control-plane-default');
    const profile = cp.properties.virtualMachineProfile;
    assert.equal(profile.securityProfile.securityType, 'ConfidentialVM');
    assert.deepEqual(profile.securityProfile.uefiSettings, { vTpmEnabled: true, secureBootEnabled: false });
    assert.equal(profile.storageProfile.osDisk.managedDisk.securityProfile.securityEncryptionType, 'VMGuestStateOnly');
    assert.equal(cp.sku.name, 'Standard_DC4as_v5');
    assert.equal(cp.sku.capacity, 3);
    assert.deepEqual(
      profile.storageProfile.dataDisks.map((d: Json) => [d.lun, d.diskSizeGB, d.managedDisk.storageAccountType]),
      [[0, 30, 'Premium_LRS']],
    );
    assert.equal(profile.storageProfile.imageReference.communityGalleryImageId, createRequest().image);
    assert.deepEqual(Object.keys(cp.identity.userAssignedIdentities), [IDENTITY]);
    assert.deepEqual(cp.tags, {
      team: 'platform',
      'constellation-uid': 'a1b2c3d4',
      'constellation-role': 'control-plane',
      'constellation-node-group': 'control_plane_default',
      'constellation-init-secret-hash': INIT_SECRET_HASH,
      'constellation-join-service-key': JOIN_SERVICE_KEY,
    });
    const cpIp = profile.networkProfile.networkInterfaceConfigurations[0].properties.ipConfigurations[0].properties;
    assert.match(
      cpIp.loadBalancerBackendAddressPools[0].id,
      /loadBalancers\/demo-a1b2c3d4-lb\/backendAddressPools\/control-plane$/,
    );
    assert.match(cpIp.subnet.id, /virtualNetworks\/demo-a1b2c3d4-vnet\/subnets\/nodes$/);
    const worker = lastPut(fake, 'virtualMachineScaleSets/demo-a1b2c3d4-worker-default');
    assert.equal(worker.tags['constellation-role'], 'worker');
    assert.equal(
      worker.properties.virtualMachineProfile.storageProfile.dataDisks[0].managedDisk.storageAccountType,
      'StandardSSD_LRS',
    );
    assert.deepEqual(
      worker.properties.virtualMachineProfile.networkProfile.networkInterfaceConfigurations[0].properties
        .ipConfigurations[0].properties.loadBalancerBackendAddressPools,
      [],
    );

    const lb = lastPut(fake, 'loadBalancers/demo-a1b2c3d4-lb');
    assert.deepEqual(
      lb.properties.loadBalancingRules.map((r: Json) => r.properties.frontendPort),
      PORTS,
    );
    // The API server's probe is HTTPS GET /readyz (as upstream's); the others are TCP.
    assert.deepEqual(
      lb.properties.probes.map((p: Json) => [p.properties.port, p.properties.protocol, p.properties.requestPath]),
      PORTS.map((p) => (p === 6443 ? [p, 'Https', '/readyz'] : [p, 'Tcp', undefined])),
    );
    assert.ok(lb.properties.loadBalancingRules.every((r: Json) => r.properties.probe.id.includes('/probes/probe-')));
    const nsg = lastPut(fake, 'networkSecurityGroups/demo-a1b2c3d4-nsg');
    assert.deepEqual(
      nsg.properties.securityRules.map((r: Json) => Number(r.properties.destinationPortRange)),
      PORTS,
    );
    const vnet = lastPut(fake, 'virtualNetworks/demo-a1b2c3d4-vnet');
    assert.match(vnet.properties.subnets[0].properties.natGateway.id, /natGateways\/demo-a1b2c3d4-nat$/);

    // Every resource carries the uid tag, and every one made is in the journal, ready.
    for (const request of fake.requests.filter((r) => r.method === 'PUT')) {
      assert.equal((request.body as Json).tags['constellation-uid'], 'a1b2c3d4', request.path);
    }
    const journal = await ctx.journal.list();
    assert.equal(journal.length, 8);
    assert.ok(journal.every((r) => (r.data as Json).status === 'ready'));
    assert.ok(!journal.some((r) => r.kind === 'azure:resource-group'), 'an existing resource group is not ours');

    const instances = await infra.listInstances(ctx);
    assert.equal(instances.length, 5);
    assert.deepEqual(instances.filter((i) => i.role === 'control-plane').length, 3);
    assert.ok(instances.every((i) => /^10\.0\.0\.\d+$/.test(i.privateIp) && i.state === 'running'));

    await infra.terminate(ctx);
    assert.deepEqual(fake.resourceIds(), [RG_ID], 'terminate leaves only the pre-existing resource group');
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('makes a missing resource group, records it, and terminate deletes it last', async function () {
    fake.resources.clear();
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    const rg = (await ctx.journal.list()).find((r) => r.kind === 'azure:resource-group');
    assert.equal(rg?.id, RG_ID);
    await infra.terminate(ctx);
    assert.deepEqual(fake.resourceIds(), []);
    const deletes = fake.requests.filter((r) => r.method === 'DELETE').map((r) => r.path.toLowerCase());
    assert.equal(deletes.at(-1), RG_ID.toLowerCase());
  });

  it('continues an interrupted create without re-creating what is ready', async function () {
    const abort = new AbortController();
    // Interrupt once Azure has accepted a scale set: its operation is being polled.
    fake.onRequest = (r: LoggedRequest) => {
      if (
        r.method === 'GET' &&
        r.path.includes('/providers/Microsoft.Compute/locations/') &&
        r.path.includes('/operations/')
      )
        abort.abort(new Error('interrupted'));
    };
    const ctx = testContext(undefined, { signal: abort.signal });
    await assert.rejects(infra.create(createRequest(), ctx), CreateFailedError);
    fake.onRequest = undefined;
    const afterFirst = await ctx.journal.list();
    assert.ok(afterFirst.some((r) => r.kind === 'azure:vnet' && (r.data as Json).status === 'ready'));
    const accepted = afterFirst.filter((r) => r.kind === 'azure:vmss' && (r.data as Json).status === 'accepted');
    assert.ok(accepted.length > 0, 'the interrupted scale set was recorded when Azure accepted it');

    const before = fake.requests.length;
    const rerun = testContext(ctx.journal);
    const result = await infra.create(createRequest(), rerun);
    const secondPuts = fake.requests.slice(before).filter((r) => r.method === 'PUT');
    assert.deepEqual(secondPuts.map((r) => r.path.split('/').slice(-2).join('/')).sort(), [
      'virtualMachineScaleSets/demo-a1b2c3d4-control-plane-default',
      'virtualMachineScaleSets/demo-a1b2c3d4-worker-default',
    ]);
    for (const set of accepted) {
      const put = secondPuts.find((r) => r.path === set.id)!;
      const key = (put.body as Json).properties.virtualMachineProfile.osProfile.linuxConfiguration.ssh.publicKeys[0]
        .keyData;
      assert.equal(
        key,
        (set.data as Json).sshPublicKey,
        'an accepted scale set keeps its SSH key (Azure cannot change it)',
      );
    }
    assert.ok(result.clusterEndpoint);
    assert.equal((await infra.listInstances(rerun)).length, 5);
    assert.ok((await rerun.journal.list()).every((r) => (r.data as Json).status === 'ready'));
  });

  it('retries throttling (429 with Retry-After) and transient 503s', async function () {
    fake.inject({
      method: 'PUT',
      path: 'virtualNetworks/',
      status: 429,
      code: 'TooManyRequests',
      message: 'throttled',
      headers: { 'Retry-After': '0' },
      times: 2,
    });
    fake.inject({
      method: 'PUT',
      path: 'loadBalancers/',
      status: 503,
      code: 'ServiceUnavailable',
      message: 'try later',
      times: 1,
    });
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    assert.equal(fake.find('PUT', 'virtualNetworks/').length, 3);
    assert.equal(fake.find('PUT', 'loadBalancers/').length, 2);
  });

  it("reports a permanent error with Azure's code and message and offers to roll back", async function () {
    const message =
      'Operation could not be completed as it results in exceeding approved standardDCASv5Family Cores quota.';
    fake.inject({
      method: 'PUT',
      path: 'virtualMachineScaleSets/',
      status: 409,
      code: 'OperationNotAllowed',
      message,
      times: 10,
    });
    const ctx = testContext();
    const err = await infra.create(createRequest(), ctx).then(
      () => assert.fail('create succeeded'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof CreateFailedError);
    assert.ok(err instanceof UserError);
    assert.equal(err.canRollBack, true);
    assert.equal(err.code, 'OperationNotAllowed');
    assert.ok(err.message.includes(message), err.message);
    assert.match(err.hint ?? '', /terminate/);
    assert.equal(fake.find('PUT', 'virtualMachineScaleSets/').length, 2, 'a 409 is not retried');

    await infra.terminate(ctx);
    assert.deepEqual(fake.resourceIds(), [RG_ID]);
  });

  it('reports a failed long-running operation with its error', async function () {
    fake.inject({
      method: 'PUT',
      path: 'virtualMachineScaleSets/demo-a1b2c3d4-worker',
      asyncError: {
        code: 'AllocationFailed',
        message: 'Allocation failed. We do not have sufficient capacity for the requested VM size in this region.',
      },
    });
    const ctx = testContext();
    await assert.rejects(infra.create(createRequest(), ctx), (err: CreateFailedError) => {
      assert.ok(err instanceof CreateFailedError);
      assert.match(err.message, /sufficient capacity/);
      return true;
    });
    const worker = (await ctx.journal.list()).find((r) => r.name === 'demo-a1b2c3d4-worker-default');
    assert.equal((worker?.data as Json).status, 'accepted', 'accepted resources are recorded before they are ready');
    await infra.terminate(ctx);
    assert.deepEqual(fake.resourceIds(), [RG_ID]);
  });

  it('terminate tolerates resources already gone and can delete by uid tag', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    // Gone behind our back: a scale set; unknown to the journal but tagged: the NAT public IP and an extra IP.
    const worker = (await ctx.journal.list()).find((r) => r.name === 'demo-a1b2c3d4-worker-default')!;
    fake.resources.delete(worker.id.toLowerCase());
    for (const key of [...fake.resources.keys()])
      if (key.startsWith(worker.id.toLowerCase() + '/')) fake.resources.delete(key);
    const natIp = (await ctx.journal.list()).find((r) => r.name === 'demo-a1b2c3d4-nat-ip')!;
    await ctx.journal.remove(natIp.id);
    const strayId = `${RG_ID}/providers/Microsoft.Network/publicIPAddresses/stray`;
    fake.seed(strayId, { tags: { 'constellation-uid': 'a1b2c3d4' }, properties: { provisioningState: 'Succeeded' } });
    const otherId = `${RG_ID}/providers/Microsoft.Network/publicIPAddresses/someone-elses`;
    fake.seed(otherId, { tags: { 'constellation-uid': 'zzz' }, properties: { provisioningState: 'Succeeded' } });

    await infra.terminate(ctx, { byTag: true });
    assert.deepEqual(fake.resourceIds(), [RG_ID, otherId].sort());
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('grows a node group to the given size', async function () {
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    await infra.scaleNodeGroup('worker_default', 4, ctx);
    const workers = (await infra.listInstances(ctx)).filter((i) => i.nodeGroup === 'worker_default');
    assert.equal(workers.length, 4);
    assert.ok(workers.every((i) => i.state === 'running' && i.createdAt));
    const patch = fake.find('PATCH', 'virtualMachineScaleSets/demo-a1b2c3d4-worker-default').at(-1)!;
    assert.equal((patch.body as Json).sku.capacity, 4);
    await assert.rejects(infra.scaleNodeGroup('nope', 1, ctx), /Node group "nope" is not part of this cluster/);
    await assert.rejects(
      infra.removeInstance('/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachines/z', ctx),
      UserError,
    );
  });

  it('refuses config Azure would refuse, before creating anything', async function () {
    const ctx = testContext();
    const noIdentity = createRequest();
    delete noIdentity.providerConfig.userAssignedIdentity;
    await assert.rejects(
      infra.create(noIdentity, ctx),
      (e: UserError) =>
        /provider\.azure\.userAssignedIdentity/.test(e.message) && /iam create azure/.test(e.hint ?? ''),
    );
    const wrongSize = createRequest();
    wrongSize.nodeGroups[1].instanceType = 'Standard_D4s_v5';
    await assert.rejects(
      infra.create(wrongSize, ctx),
      /nodeGroups\.worker_default\.instanceType "Standard_D4s_v5" cannot run azure-sev-snp/,
    );
    await assert.rejects(
      infra.create(createRequest({ attestationVariant: 'gcp-sev-snp' }), ctx),
      /does not run on Azure/,
    );
    assert.equal(fake.requests.length, 0);
  });
});
