/**
 * `iam upgrade apply` (cli/iam/index.ts upgradeIam, each cloud's IamProvisioner.upgrade) against the fake clouds:
 * identities an older CLI made with other permissions are shown with what would be added and removed, and updated
 * only when applied; up-to-date identities give no change.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { upgradeIam } from '../../cli/iam/index.js';
import { createLogger } from '../../lib/logging/index.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import awsProvider from '../../providers/aws/index.js';
import { policyActions } from '../../providers/aws/iam.js';
import { AzureIam, NODE_ROLES } from '../../providers/azure/iam.js';
import { parseAzureOptions } from '../../providers/azure/options.js';
import gcpProvider from '../../providers/gcp/index.js';
import { NODE_PERMISSIONS } from '../../providers/gcp/iam.js';
import type { ProviderModule } from '../../providers/contract.js';
import { startFakeAws, type FakeAws } from '../fakes/aws/server.js';
import { FakeArm } from '../fakes/azure/arm-server.js';
import { FakeGcp } from '../fakes/gcp/server.js';
import { runCli } from '../support/cli.js';
import { context as awsContext, fakeOptions as awsOptions } from '../providers/aws/support.js';
import { testContext as azureContext } from '../providers/azure/context.js';
import { SUBSCRIPTION } from '../providers/azure/fixtures.js';
import { PROJECT, providerContext as gcpContext } from '../providers/gcp/support.js';

const log = createLogger(() => {});

describe('iam upgrade apply', function () {
  this.timeout(60_000);

  describe('aws (fake IAM)', () => {
    let fake: FakeAws;
    beforeEach(async () => {
      fake = await startFakeAws({ lroMs: 5 });
    });
    afterEach(async () => {
      await fake.close();
    });

    it("puts the control plane's policy back to this CLI's actions: an older CLI's volume and scaling rights removed, a missing one added", async () => {
      const journal = new MemoryResourceJournal();
      const ctx = { ...awsContext(), journal };
      const iam = await awsProvider.iam!(awsOptions(fake));
      await iam.create({ prefix: 'demo', providerConfig: { region: 'us-east-2' } }, ctx);
      const role = fake.state.roles.get('demo-control-plane-role')!;
      const current = JSON.parse(role.policies.get('demo-control-plane-policy')!) as {
        Statement: { Action: string[] }[];
      };
      const wanted = current.Statement[0]!.Action;
      // What an older CLI granted: CSI and autoscaler rights, and no ec2:CreateTags.
      const older = [
        ...wanted.filter((a) => a !== 'ec2:CreateTags'),
        'ec2:CreateVolume',
        'autoscaling:SetDesiredCapacity',
      ];
      role.policies.set(
        'demo-control-plane-policy',
        JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: older, Resource: '*' }] }),
      );

      const module = { ...awsProvider, iam: () => awsProvider.iam!(awsOptions(fake)) } as ProviderModule;
      const run = { workspaceDir: os.tmpdir(), journal, log, loadProvider: async () => module };
      const plan = await upgradeIam({ ...run, apply: false });
      assert.deepEqual(plan.changes, [
        {
          provider: 'aws',
          identity: 'demo-control-plane-role/demo-control-plane-policy',
          add: ['ec2:CreateTags'],
          remove: ['autoscaling:SetDesiredCapacity', 'ec2:CreateVolume'],
        },
      ]);
      assert.deepEqual(
        policyActions(role.policies.get('demo-control-plane-policy')!).sort(),
        [...older].sort(),
        'planning changed nothing',
      );

      const applied = await upgradeIam({ ...run, apply: true });
      assert.equal(applied.applied, true);
      assert.deepEqual(policyActions(role.policies.get('demo-control-plane-policy')!).sort(), [...wanted].sort());
      assert.deepEqual((await upgradeIam({ ...run, apply: false })).changes, [], 'up to date afterwards');
    });
  });

  describe('gcp (fake IAM API)', () => {
    let fake: FakeGcp;
    before(async () => {
      fake = await FakeGcp.start();
    });
    after(async () => {
      await fake.close();
    });

    it("patches the nodes' custom role to this CLI's permissions", async () => {
      const ctx = gcpContext();
      const iam = await gcpProvider.iam!(fake.providerOptions());
      await iam.create(
        { prefix: 'myconst', providerConfig: { project: PROJECT, region: 'europe-west3', zone: 'europe-west3-b' } },
        ctx,
      );
      const name = `projects/${PROJECT}/roles/myconst_node`;
      const role = fake.iam.roles.get(name) as { includedPermissions: string[] };
      role.includedPermissions = [
        ...NODE_PERMISSIONS.filter((p) => p !== 'compute.zones.list'),
        'compute.disks.create',
      ];

      assert.deepEqual(await iam.upgrade(ctx, { apply: false }), [
        { identity: name, add: ['compute.zones.list'], remove: ['compute.disks.create'] },
      ]);
      assert.ok(
        (fake.iam.roles.get(name) as { includedPermissions: string[] }).includedPermissions.includes(
          'compute.disks.create',
        ),
        'planning changed nothing',
      );
      await iam.upgrade(ctx, { apply: true });
      assert.deepEqual(
        [...(fake.iam.roles.get(name) as { includedPermissions: string[] }).includedPermissions].sort(),
        [...NODE_PERMISSIONS].sort(),
      );
      assert.deepEqual(await iam.upgrade(ctx, { apply: false }), []);
    });
  });

  describe('azure (fake ARM)', () => {
    let fake: FakeArm;
    beforeEach(async () => {
      fake = await FakeArm.start();
    });
    afterEach(async () => {
      await fake.stop();
    });

    it("assigns a role the nodes' identity lacks, and reports nothing when all are there", async () => {
      const iam = new AzureIam(parseAzureOptions(fake.providerOptions()));
      const ctx = azureContext();
      await iam.create({ prefix: 'demo', providerConfig: { subscription: SUBSCRIPTION, location: 'westeurope' } }, ctx);
      assert.deepEqual(await iam.upgrade(ctx, { apply: false }), []);
      // What an older CLI made: the identity without the Network Contributor assignment.
      const network = (await ctx.journal.list()).find(
        (r) => r.kind === 'azure:role-assignment' && r.name === NODE_ROLES[1].name,
      )!;
      await ctx.journal.remove(network.id);
      const removed = fake.resourceIds().length;

      assert.deepEqual(await iam.upgrade(ctx, { apply: false }), [
        { identity: 'demo-nodes', add: ['Network Contributor'], remove: [] },
      ]);
      await iam.upgrade(ctx, { apply: true });
      assert.ok(
        (await ctx.journal.list()).some((r) => r.id === network.id),
        'the assignment is recorded again',
      );
      assert.ok(
        fake.resourceIds().some((id) => id.toLowerCase() === network.id.toLowerCase()),
        'ARM holds the assignment',
      );
      assert.ok(fake.resourceIds().length >= removed);
      assert.deepEqual(await iam.upgrade(ctx, { apply: false }), []);
    });
  });

  it('the command says when the workspace records no identities, and changes nothing', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'iam-upgrade-'));
    try {
      const out = await runCli(['iam', 'upgrade', 'apply', '-C', dir]);
      assert.equal(out.code, 0, out.stderr);
      assert.match(out.stdout, /The workspace records no identities made by `iam create`: nothing to upgrade\./);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
