/**
 * GCP as `upgrade apply` and `apply` scale-in use it, against the fake Compute API modelling what GCP documents:
 * deleteInstances lowers the group's target size, a resize down picks its own victims, new instances are
 * PROVISIONING for a while, and concurrent changes to one network are refused with resourceNotReady. Each `it`
 * makes its own cluster.
 */
import assert from 'node:assert/strict';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, INIT_SECRET_HASH, providerContext } from './support.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NEW_IMAGE = 'projects/constellation-images/global/images/constellation-v2-19-0';

describe('GCP single instances: add, drain, remove, initialized (fake Compute API)', function () {
  this.timeout(30_000);
  let fake: FakeGcp;
  let infra: GcpInfrastructure;

  before(async () => {
    fake = await FakeGcp.start();
    infra = new GcpInfrastructure(fake.providerOptions({ image: NEW_IMAGE }));
  });
  beforeEach(() => fake.reset({ operationMs: 3 }));
  after(async () => {
    await fake.close();
  });

  const igm = (role: 'control-plane' | 'worker') =>
    fake.compute
      .list('instanceGroupManagers')
      .find((g) => String(g.name).includes(role === 'control-plane' ? 'control-plane' : 'worker'))!;
  const metadataOf = (instance: Json) =>
    Object.fromEntries(((instance.metadata?.items ?? []) as Json[]).map((i) => [i.key, i.value]));

  it('retries inserts GCP refuses with resourceNotReady while another change to the new network runs', async () => {
    fake.reset({ operationMs: 20 });
    await infra.create(createRequest(), providerContext());
    assert.ok(fake.compute.notReadyRefusals > 0, 'the subnetwork, router and firewalls met resourceNotReady');
    assert.equal(fake.compute.list('firewalls').length, 2);
    assert.equal(fake.compute.list('subnetworks').length, 1);
    assert.equal(fake.compute.list('routers').length, 1);
  });

  it('removes exactly the chosen instance and the group shrinks by one: GCP makes no replacement and deletes no other', async () => {
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    const before = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    const victim = before[1]!;
    await infra.removeInstance(victim.id, ctx);
    const after = (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane');
    assert.deepEqual(
      after.map((i) => i.name),
      before.filter((i) => i !== victim).map((i) => i.name),
    );
    assert.equal(igm('control-plane').targetSize, 2);
    // Again: already gone, nothing happens.
    await infra.removeInstance(victim.id, ctx);
    assert.equal(igm('control-plane').targetSize, 2);
  });

  it('adds one instance, booting the configured image from a new template, and returns it once GCP reports it running', async () => {
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    fake.compute.instanceBootMs = 60;
    const added = await infra.addInstance('worker_default', ctx);
    assert.equal(added.state, 'running');
    assert.equal(added.image, NEW_IMAGE);
    assert.ok(added.createdAt);
    assert.equal(igm('worker').targetSize, 3);
    const instance = fake.compute.list('instances').find((i) => i.name === added.name)!;
    const template = fake.compute
      .list('instanceTemplates')
      .find(
        (t) =>
          t.selfLink === instance.instanceTemplate || String(instance.instanceTemplate).endsWith(`/${String(t.name)}`),
      )!;
    assert.equal((template.properties as Json).disks.find((d: Json) => d.boot).initializeParams.sourceImage, NEW_IMAGE);
    // The older instances keep the image they were made with; terminate deletes the new template too.
    const older = (await infra.listInstances(ctx)).filter((i) => i.role === 'worker' && i.name !== added.name);
    assert.deepEqual(
      older.map((i) => i.image),
      [createRequest().image, createRequest().image],
    );
    await infra.terminate(ctx);
    assert.deepEqual(fake.compute.list(), []);
  });

  it('drains an instance out of the load balancer while it keeps running, then removes it', async () => {
    const ctx = providerContext();
    const request = createRequest({
      nodeGroups: [{ ...createRequest().nodeGroups[0]!, initialCount: 1 }, createRequest().nodeGroups[1]!],
    });
    const { clusterEndpoint } = await infra.create(request, ctx);
    const added = await infra.addInstance('control_plane_default', ctx);
    const old = (await infra.listInstances(ctx)).find((i) => i.role === 'control-plane' && i.name !== added.name)!;
    await infra.drainInstance(old.id, ctx);
    // Every connection through the load balancer reaches the new node; the old one still runs.
    for (let n = 0; n < 5; n++)
      assert.equal((fake.compute.connect(clusterEndpoint, 30090) as { instance: string }).instance, added.name);
    assert.equal((await infra.listInstances(ctx)).find((i) => i.name === old.name)?.state, 'running');
    await infra.removeInstance(old.id, ctx);
    assert.deepEqual(
      (await infra.listInstances(ctx)).filter((i) => i.role === 'control-plane').map((i) => i.name),
      [added.name],
    );
    assert.equal(igm('control-plane').targetSize, 1);
  });

  it('once initialized, no template and no instance carries the init-secret hash, and no node added later does', async () => {
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    await infra.markInitialized(ctx);
    for (const instance of fake.compute.list('instances'))
      assert.equal(metadataOf(instance)['constellation-init-secret-hash'], undefined, String(instance.name));
    const added = await infra.addInstance('control_plane_default', ctx);
    await infra.scaleNodeGroup('worker_default', 3, ctx);
    const later = fake.compute
      .list('instances')
      .filter((i) => i.name === added.name || metadataOf(i)['constellation-role'] === 'worker');
    assert.equal(later.length, 4);
    for (const instance of later) {
      assert.equal(metadataOf(instance)['constellation-init-secret-hash'], undefined, String(instance.name));
      assert.ok(metadataOf(instance)['constellation-join-service-key']);
    }
    assert.ok(!JSON.stringify(fake.compute.list('instances')).includes(INIT_SECRET_HASH));
    // Twice changes nothing more.
    const templates = fake.compute.list('instanceTemplates').length;
    await infra.markInitialized(ctx);
    assert.equal(fake.compute.list('instanceTemplates').length, templates);
  });

  it('grows a group with resize and waits until its new instances run', async () => {
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    fake.compute.instanceBootMs = 60;
    await infra.scaleNodeGroup('worker_default', 4, ctx);
    const workers = (await infra.listInstances(ctx)).filter((i) => i.role === 'worker');
    assert.deepEqual(
      workers.map((i) => i.state),
      ['running', 'running', 'running', 'running'],
    );
  });

  it('waits while a new key (invalid_grant) or role binding (403) takes effect before it creates anything', async () => {
    fake.inject({
      match: /^GET \/compute\/v1\/projects\/fake-project\/global\/networks/,
      status: 400,
      message: 'invalid_grant: Invalid JWT Signature.',
    });
    fake.inject({
      match: /^GET \/compute\/v1\/projects\/fake-project\/global\/networks/,
      status: 403,
      message: "Required 'compute.networks.list' permission for 'projects/fake-project'",
      reason: 'forbidden',
      times: 2,
    });
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    assert.ok(ctx.messages.includes("waiting for the service account's key and roles to take effect"));
    assert.equal(fake.compute.list('networks').length, 1);
    // A permission that never comes: the 403 is reported once the wait is over.
    fake.reset({ operationMs: 3 });
    fake.inject({
      match: /^GET \/compute\/v1\/projects\/fake-project\/global\/networks/,
      status: 403,
      message: "Required 'compute.networks.list' permission",
      reason: 'forbidden',
      times: 100,
    });
    await assert.rejects(infra.create(createRequest(), providerContext()), /compute\.networks\.list/);
    assert.equal(fake.compute.list().length, 0);
  });

  it('refuses zones outside the region before any call', async () => {
    const request = createRequest();
    request.nodeGroups[1]!.zone = 'us-central1-a';
    await assert.rejects(infra.create(request, providerContext()), (err: Error) =>
      /us-central1-a\) is not in the region europe-west3/.test(err.message),
    );
    await assert.rejects(
      infra.create(
        createRequest({ providerConfig: { ...createRequest().providerConfig, zone: 'europe-west4-a' } }),
        providerContext(),
      ),
      /provider\.gcp\.zone \(europe-west4-a\) is not in the region/,
    );
    assert.equal(fake.requests.length, 0);
  });

  it('makes the network with MTU 8896 and the instances with their serial port on, as upstream', async () => {
    await infra.create(createRequest(), providerContext());
    assert.equal(fake.compute.list('networks')[0]!.mtu, 8896);
    for (const template of fake.compute.list('instanceTemplates'))
      assert.equal(metadataOf(template.properties as Json)['serial-port-enable'], 'TRUE');
  });
});

describe('the fake GCP managed instance group (as GCP documents it)', function () {
  let fake: FakeGcp;
  let infra: GcpInfrastructure;
  before(async () => {
    fake = await FakeGcp.start();
    infra = new GcpInfrastructure(fake.providerOptions());
  });
  after(async () => {
    await fake.close();
  });

  it('resized down, deletes instances not running first, then ones on an older template', async () => {
    fake.reset();
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    const members = () => fake.compute.list('instances').filter((i) => String(i.name).includes('-cp-'));
    const [first] = members();
    first!.status = 'STAGING';
    await infra.scaleNodeGroup('control_plane_default', 2, ctx);
    assert.ok(!members().some((i) => i.name === first!.name), 'the instance that was not running went');
    // A newer template: the instances made from the older one go first.
    const upgraded = new GcpInfrastructure(fake.providerOptions({ image: NEW_IMAGE }));
    const added = await upgraded.addInstance('control_plane_default', ctx);
    await infra.scaleNodeGroup('control_plane_default', 2, ctx);
    assert.ok(
      members().some((i) => i.name === added.name),
      'the instance on the current template stayed',
    );
    assert.equal(members().length, 2);
  });
});
