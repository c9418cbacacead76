import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'mocha';
import { UserError } from '../../../lib/errors.js';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';
import provider from '../../../providers/aws/index.js';
import type { RecordedResource } from '../../../providers/contract.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, fakeOptions } from './support.js';

describe('aws provider: iam create / destroy', function () {
  let fake: FakeAws;

  beforeEach(async () => {
    fake = await startFakeAws({ lroMs: 20 });
  });
  afterEach(async () => {
    await fake.close();
  });

  it('makes a role with a policy and an instance profile per node role, returns the config keys, and destroy removes them', async () => {
    const iam = await provider.iam!(fakeOptions(fake));
    const ctx = context();
    const result = await iam.create({ prefix: 'demo', providerConfig: { region: 'us-east-2' } }, ctx);
    assert.deepEqual(result.configUpdates, {
      iamProfileControlPlane: 'demo-control-plane-profile',
      iamProfileWorkerNodes: 'demo-worker-profile',
    });

    const cp = fake.state.roles.get('demo-control-plane-role')!;
    assert.match(cp.assumeRolePolicy, /ec2\.amazonaws\.com/);
    const cpPolicy = JSON.parse(cp.policies.get('demo-control-plane-policy')!) as { Statement: { Action: string[] }[] };
    assert.ok(cpPolicy.Statement[0].Action.includes('ec2:CreateTags'), 'the cloud controller manager tags instances');
    for (const unused of ['ec2:CreateVolume', 'autoscaling:SetDesiredCapacity', 'elasticloadbalancing:*']) {
      assert.ok(
        !cpPolicy.Statement[0].Action.includes(unused),
        `${unused}: no CSI driver, autoscaler or Service controller runs`,
      );
    }
    const workerPolicy = JSON.parse(fake.state.roles.get('demo-worker-role')!.policies.get('demo-worker-policy')!) as {
      Statement: { Action: string[] }[];
    };
    assert.ok(workerPolicy.Statement[0].Action.includes('ec2:DescribeInstances'));
    assert.ok(!workerPolicy.Statement[0].Action.includes('ec2:CreateTags'), 'workers get read access only');
    assert.deepEqual(fake.state.instanceProfiles.get('demo-control-plane-profile')!.roles, ['demo-control-plane-role']);
    assert.deepEqual(fake.state.instanceProfiles.get('demo-worker-profile')!.roles, ['demo-worker-role']);
    assert.ok(fake.calls('GetInstanceProfile').length >= 2, 'waited until IAM shows the profiles');

    // A re-run is a no-op; destroy deletes in reverse order (IAM refuses otherwise).
    await iam.create({ prefix: 'demo', providerConfig: {} }, ctx);
    assert.equal(fake.calls('CreateRole').length, 2);
    await iam.destroy(ctx);
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await ctx.journal.list(), []);
  });

  it('continues after a crash between creating and recording an identity', async () => {
    let crashed = false;
    const journal = new (class extends MemoryResourceJournal {
      override async record(r: RecordedResource) {
        if (!crashed && r.kind === 'aws:iam-instance-profile') {
          crashed = true;
          throw new Error('crash');
        }
        return super.record(r);
      }
    })();
    const iam = await provider.iam!(fakeOptions(fake));
    await assert.rejects(iam.create({ prefix: 'demo', providerConfig: {} }, context(journal)));
    await iam.create({ prefix: 'demo', providerConfig: {} }, context(journal));
    assert.equal(fake.state.instanceProfiles.size, 2);
    await iam.destroy(context(journal));
    assert.deepEqual(fake.live(), []);
  });

  it('refuses to take over an identity it did not make, and a bad prefix', async () => {
    fake.state.roles.set('demo-worker-role', {
      name: 'demo-worker-role',
      arn: 'arn:aws:iam::1:role/demo-worker-role',
      assumeRolePolicy: '{}',
      policies: new Map(),
      tags: {},
    });
    const iam = await provider.iam!(fakeOptions(fake));
    await assert.rejects(
      iam.create({ prefix: 'demo', providerConfig: {} }, context()),
      (e: UserError) => /demo-worker-role already exists/.test(e.message) && /--prefix/.test(e.hint ?? ''),
    );
    await assert.rejects(iam.create({ prefix: 'bad prefix!', providerConfig: {} }, context()), /prefix "bad prefix!"/);
  });
});
