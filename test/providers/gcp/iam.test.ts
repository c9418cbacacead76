/**
 * `iam create gcp` / `iam destroy` against the fake IAM and Resource Manager APIs: service accounts, custom
 * role, project policy bindings, key file and config updates; idempotent re-runs; etag conflicts; destroy.
 */
import assert from 'node:assert/strict';
import provider from '../../../providers/gcp/index.js';
import { CLUSTER_ROLES, KEY_FILE, NODE_PERMISSIONS } from '../../../providers/gcp/iam.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, PROJECT, providerContext } from './support.js';

describe('GCP iam create / destroy (fake IAM API)', () => {
  let fake: FakeGcp;
  before(async () => {
    fake = await FakeGcp.start();
  });
  beforeEach(() => fake.reset());
  after(async () => {
    await fake.close();
  });

  const request = {
    prefix: 'myconst',
    providerConfig: { project: PROJECT, region: 'europe-west3', zone: 'europe-west3-b' },
  };
  const clusterEmail = `myconst-sa@${PROJECT}.iam.gserviceaccount.com`;
  const nodeEmail = `myconst-vm@${PROJECT}.iam.gserviceaccount.com`;

  it('makes the service accounts, the node role, the bindings and the key file', async () => {
    const iam = await provider.iam!(fake.providerOptions());
    const result = await iam.create(request, providerContext());
    assert.deepEqual(result.configUpdates, {
      project: PROJECT,
      region: 'europe-west3',
      zone: 'europe-west3-b',
      serviceAccountKeyPath: KEY_FILE,
      IAMServiceAccountVM: nodeEmail,
    });
    assert.equal(result.files?.length, 1);
    const key = JSON.parse(result.files![0]!.content) as { type: string; client_email: string };
    assert.equal(result.files![0]!.name, 'gcpServiceAccountKey.json');
    assert.deepEqual([key.type, key.client_email], ['service_account', clusterEmail]);

    assert.deepEqual([...fake.iam.serviceAccounts.keys()].sort(), [clusterEmail, nodeEmail]);
    const role = fake.iam.roles.get(`projects/${PROJECT}/roles/myconst_node`) as { includedPermissions: string[] };
    assert.deepEqual(role.includedPermissions, [...NODE_PERMISSIONS]);
    const bindings = fake.iam.policies.get(PROJECT)!.bindings;
    for (const r of CLUSTER_ROLES)
      assert.deepEqual(bindings.find((b) => b.role === r)?.members, [`serviceAccount:${clusterEmail}`]);
    assert.deepEqual(bindings.find((b) => b.role === `projects/${PROJECT}/roles/myconst_node`)?.members, [
      `serviceAccount:${nodeEmail}`,
    ]);
    assert.equal(fake.iam.keys.size, 1);
  });

  it('waits until IAM shows the new service accounts before binding them (on the injected sleep, without real waiting)', async () => {
    // IAM answers "not found" for a new account (and refuses a policy naming it) for a while after creating it.
    fake.iam.propagationRequests = 3;
    const slept: number[] = [];
    const iam = await provider.iam!(fake.providerOptions({ sleep: async (ms) => void slept.push(ms) }));
    const ctx = providerContext();
    await iam.create(request, ctx);
    const bindings = fake.iam.policies.get(PROJECT)!.bindings;
    assert.deepEqual(bindings.find((b) => b.role === `projects/${PROJECT}/roles/myconst_node`)?.members, [
      `serviceAccount:${nodeEmail}`,
    ]);
    // Each account: three "not found" answers, each followed by a longer pause (the two are awaited concurrently).
    assert.deepEqual(
      slept.sort((a, b) => a - b),
      [500, 500, 1000, 1000, 2000, 2000],
    );
    assert.ok(ctx.messages.some((m) => /waiting until IAM shows service account/.test(m)));
  });

  it("gives up with IAM's message when an account never becomes visible", async () => {
    fake.iam.propagationRequests = 1000;
    const iam = await provider.iam!(
      fake.providerOptions({ sleep: async () => undefined, iamVisibility: { attempts: 4 } }),
    );
    await assert.rejects(
      iam.create(request, providerContext()),
      (err: Error & { hint?: string }) =>
        /Creating the GCP identities/.test(err.message) && /iam create gcp/.test(err.hint ?? ''),
    );
    assert.equal(fake.iam.policies.get(PROJECT), undefined, 'no policy was written');
  });

  it('continues after a failure, retries an etag conflict, and destroy removes exactly what it made', async () => {
    // Someone else's binding must survive destroy.
    fake.iam.policies.set(PROJECT, {
      version: 1,
      etag: 'BwAAAA==',
      bindings: [{ role: 'roles/viewer', members: ['user:alice@example.com'] }],
    });
    fake.inject({
      match: /:setIamPolicy$/,
      status: 403,
      message: 'Policy update access denied.',
      grpcStatus: 'PERMISSION_DENIED',
    });
    const ctx = providerContext();
    const iam = await provider.iam!(fake.providerOptions());
    await assert.rejects(
      iam.create(request, ctx),
      (err: Error & { hint?: string }) =>
        /Policy update access denied/.test(err.message) && /iam destroy/.test(err.hint ?? ''),
    );

    fake.inject({
      match: /:setIamPolicy$/,
      status: 409,
      message: 'There were concurrent policy changes.',
      grpcStatus: 'ABORTED',
    });
    await iam.create(request, ctx);
    assert.equal(
      fake.calls(/\/serviceAccounts$/).length,
      4,
      'the re-run asked again and adopted the existing accounts',
    );
    assert.equal(fake.iam.serviceAccounts.size, 2);
    assert.equal(fake.iam.keys.size, 1);

    // The infrastructure's terminate leaves IAM records alone.
    await new GcpInfrastructure(fake.providerOptions()).terminate(ctx);
    assert.equal(fake.iam.serviceAccounts.size, 2);

    await iam.destroy(ctx);
    assert.equal(fake.iam.serviceAccounts.size, 0);
    // IAM deletes custom roles softly: the role stays, marked deleted (its ID blocked for 37 days).
    assert.deepEqual(
      [...fake.iam.roles.values()].map((r) => r.deleted),
      [true],
    );
    assert.equal(fake.iam.keys.size, 0);
    assert.deepEqual(fake.iam.policies.get(PROJECT)!.bindings, [
      { role: 'roles/viewer', members: ['user:alice@example.com'] },
    ]);
    assert.deepEqual(await ctx.journal.list(), []);
    await iam.destroy(ctx); // nothing left: a no-op
  });

  it('after an iam destroy, undeletes the soft-deleted node role and gives it the node permissions again', async () => {
    const roleName = `projects/${PROJECT}/roles/${request.prefix.replace(/-/g, '_')}_node`;
    fake.iam.softDeleteRole(roleName, { title: 'old', includedPermissions: ['compute.instances.delete'], stage: 'GA' });
    await (await provider.iam!(fake.providerOptions())).create(request, providerContext());
    const role = fake.iam.roles.get(roleName)!;
    assert.equal(role.deleted, undefined);
    assert.deepEqual(role.includedPermissions, [...NODE_PERMISSIONS]);
  });

  it('reads and writes the project policy at version 3, so conditional bindings of others survive create and destroy', async () => {
    const conditional = {
      role: 'roles/storage.admin',
      members: ['user:bob@example.com'],
      condition: { title: 'until 2030', expression: 'request.time < timestamp("2030-01-01T00:00:00Z")' },
    };
    fake.iam.policies.set(PROJECT, { version: 3, etag: 'BwAAAA==', bindings: [conditional] });
    const ctx = providerContext();
    const iam = await provider.iam!(fake.providerOptions());
    await iam.create(request, ctx);
    assert.equal(fake.iam.policies.get(PROJECT)!.version, 3);
    assert.deepEqual(
      fake.iam.policies.get(PROJECT)!.bindings.find((b) => b.condition),
      conditional,
    );
    await iam.destroy(ctx);
    assert.deepEqual(fake.iam.policies.get(PROJECT)!.bindings, [conditional]);
  });

  it('needs a project and a usable prefix', async () => {
    const iam = await provider.iam!(fake.providerOptions());
    await assert.rejects(iam.create({ prefix: 'x', providerConfig: {} }, providerContext()), /needs the GCP project/);
    await assert.rejects(
      iam.create({ prefix: '1', providerConfig: { project: PROJECT } }, providerContext()),
      /cannot name GCP service accounts/,
    );
    assert.equal(fake.requests.length, 0);
  });

  it('keeps IAM and infrastructure records apart in one journal', async () => {
    const ctx = providerContext();
    const iam = await provider.iam!(fake.providerOptions());
    await iam.create(request, ctx);
    const infra = new GcpInfrastructure(fake.providerOptions());
    await infra.create(createRequest(), ctx);
    await iam.destroy(ctx);
    assert.equal(fake.compute.list('networks').length, 1);
    await infra.terminate(ctx);
    assert.deepEqual(fake.compute.list(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });
});
