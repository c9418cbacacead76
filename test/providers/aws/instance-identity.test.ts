/** The aws-sev-snp join service's instance lookup (providers/aws/instance-identity.ts) against the fake EC2. */
import assert from 'node:assert/strict';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import { awsInstanceIdentity } from '../../../providers/aws/instance-identity.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, createRequest, fakeOptions } from './support.js';

describe('aws provider: instance identity for control-plane tickets', function () {
  this.timeout(30_000);
  let fake: FakeAws;
  before(async () => {
    fake = await startFakeAws({ lroMs: 5 });
    await new AwsInfrastructure(fakeOptions(fake)).create(createRequest(), context());
  });
  after(async () => {
    await fake.close();
  });

  it('names an instance of its own cluster with its DNS name, address and the role of its group', async () => {
    const identify = awsInstanceIdentity(fakeOptions(fake), async () => 'a1b2c3d4');
    for (const role of ['control-plane', 'worker'] as const) {
      const instance = [...fake.state.instances.values()].find((i) => i.tags['constellation-role'] === role)!;
      assert.deepEqual(await identify(instance.id, 'us-east-2'), {
        name: `ip-${instance.privateIp.replace(/\./g, '-')}.us-east-2.compute.internal`,
        role,
        addresses: [instance.privateIp],
      });
    }
  });

  it("names nobody for another cluster's instance or one EC2 does not know", async () => {
    const other = awsInstanceIdentity(fakeOptions(fake), async () => 'ffffffff');
    const instance = [...fake.state.instances.values()].find((i) => i.tags['constellation-role'] === 'control-plane')!;
    assert.equal(await other(instance.id, 'us-east-2'), undefined);
    assert.equal(
      await awsInstanceIdentity(fakeOptions(fake), async () => 'a1b2c3d4')('i-0000000000000dead', 'us-east-2'),
      undefined,
    );
  });
});
