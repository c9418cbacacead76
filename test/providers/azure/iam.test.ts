/**
 * `iam create azure` / `iam destroy` against the fake ARM: resource group, user-assigned identity and role
 * assignments on the group; the config keys for --update-config; retry while the identity replicates;
 * idempotent re-runs; destroy removes exactly what was made.
 */
import assert from 'node:assert/strict';
import { AzureIam, deterministicUuid, NODE_ROLES } from '../../../providers/azure/iam.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { FakeArm, FAKE_TENANT } from '../../fakes/azure/arm-server.js';
import { testContext } from './context.js';
import { SUBSCRIPTION } from './fixtures.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const RG_ID = `/subscriptions/${SUBSCRIPTION}/resourceGroups/demo-rg`;
const IDENTITY_ID = `${RG_ID}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/demo-nodes`;

describe('azure iam (fake ARM)', function () {
  let fake: FakeArm;
  let iam: AzureIam;

  beforeEach(async function () {
    fake = await FakeArm.start();
    iam = new AzureIam(parseAzureOptions(fake.providerOptions()));
  });

  afterEach(async function () {
    await fake.stop();
  });

  it('makes the group, the identity and its role assignments, and destroy removes them', async function () {
    // The identity has not replicated yet for the first assignment attempt.
    fake.inject({
      method: 'PUT',
      path: 'roleAssignments/',
      status: 400,
      code: 'PrincipalNotFound',
      message: 'Principal 1234 does not exist in the directory.',
    });
    const ctx = testContext();
    const result = await iam.create(
      { prefix: 'demo', providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope' } },
      ctx,
    );

    assert.deepEqual(result.configUpdates, {
      subscription: SUBSCRIPTION,
      tenant: FAKE_TENANT,
      location: 'westeurope',
      resourceGroup: 'demo-rg',
      userAssignedIdentity: IDENTITY_ID,
    });
    const identity = fake.get(IDENTITY_ID) as Json;
    const assignments = fake.resourceIds().filter((id) => id.includes('roleAssignments'));
    assert.equal(assignments.length, NODE_ROLES.length);
    for (const role of NODE_ROLES) {
      const id = `${RG_ID}/providers/Microsoft.Authorization/roleAssignments/${deterministicUuid(RG_ID, role.id, identity.properties.principalId)}`;
      const body = fake.get(id) as Json;
      assert.ok(body, `role assignment for ${role.name}`);
      assert.equal(body.properties.principalId, identity.properties.principalId);
      assert.equal(body.properties.principalType, 'ServicePrincipal');
      assert.ok(body.properties.roleDefinitionId.endsWith(`/roleDefinitions/${role.id}`));
    }
    assert.equal(
      fake.find('PUT', 'roleAssignments/').length,
      NODE_ROLES.length + 1,
      'PrincipalNotFound was retried once',
    );
    assert.deepEqual((await ctx.journal.list()).map((r) => r.kind).sort(), [
      'azure:resource-group',
      'azure:role-assignment',
      'azure:role-assignment',
      'azure:user-assigned-identity',
    ]);

    // A re-run makes the same assignments (deterministic names) instead of new ones.
    await iam.create({ prefix: 'demo', providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope' } }, ctx);
    assert.equal(fake.resourceIds().filter((id) => id.includes('roleAssignments')).length, NODE_ROLES.length);

    await iam.destroy(ctx);
    assert.deepEqual(fake.resourceIds(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('registers the subscription for Microsoft.ManagedIdentity on a fresh subscription before making the identity', async function () {
    fake.unregister('Microsoft.ManagedIdentity');
    const registering = new AzureIam(parseAzureOptions(fake.providerOptions({ registrationPollMs: 1 })));
    const result = await registering.create(
      { prefix: 'demo', providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope' } },
      testContext(),
    );
    assert.match(String(result.configUpdates.userAssignedIdentity), /userAssignedIdentities\/demo-nodes$/);
    assert.equal(fake.find('POST', '/providers/Microsoft.ManagedIdentity/register').length, 1);
  });

  it("names the identity as given (upstream's --servicePrincipal)", async function () {
    const result = await iam.create(
      {
        prefix: 'demo',
        providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope', identityName: 'my-nodes' },
      },
      testContext(),
    );
    assert.match(String(result.configUpdates.userAssignedIdentity), /userAssignedIdentities\/my-nodes$/);
  });

  it('uses an existing resource group without taking ownership of it', async function () {
    fake.seed(`/subscriptions/${SUBSCRIPTION}/resourceGroups/shared`, {
      location: 'westeurope',
      properties: { provisioningState: 'Succeeded' },
    });
    const ctx = testContext();
    const result = await iam.create(
      {
        prefix: 'demo',
        providerConfig: {
          subscription: SUBSCRIPTION,
          location: 'westeurope',
          resourceGroup: 'shared',
          tenant: 'my-tenant',
        },
      },
      ctx,
    );
    assert.equal(result.configUpdates.resourceGroup, 'shared');
    assert.equal(result.configUpdates.tenant, 'my-tenant');
    assert.ok(!(await ctx.journal.list()).some((r) => r.kind === 'azure:resource-group'));
    await iam.destroy(ctx);
    assert.deepEqual(fake.resourceIds(), [`/subscriptions/${SUBSCRIPTION}/resourceGroups/shared`]);
  });

  it('names the missing input', async function () {
    await assert.rejects(
      iam.create({ prefix: 'demo', providerConfig: { location: 'westeurope' } }, testContext()),
      (e: Error & { hint?: string }) => {
        assert.match(e.message, /needs the subscription/);
        assert.match(e.hint ?? '', /--subscription/);
        return true;
      },
    );
  });

  it('reports a permission error with what is missing', async function () {
    fake.inject({
      method: 'PUT',
      path: 'roleAssignments/',
      status: 403,
      code: 'AuthorizationFailed',
      message:
        "The client does not have authorization to perform action 'Microsoft.Authorization/roleAssignments/write'.",
      times: 5,
    });
    await assert.rejects(
      iam.create(
        { prefix: 'demo', providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope' } },
        testContext(),
      ),
      (e: Error & { hint?: string }) => {
        assert.match(e.message, /roleAssignments\/write/);
        assert.match(e.hint ?? '', /User Access Administrator/);
        return true;
      },
    );
  });
});
