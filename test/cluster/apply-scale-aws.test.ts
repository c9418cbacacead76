/**
 * `apply` scaling on AWS against the fake (real SDK, fake at the wire): scale-out through the group's desired
 * capacity, scale-in of exactly the nodes `apply` chose (the newest by EC2's LaunchTime), never the ones the auto
 * scaling group's termination policy would pick when its desired capacity is lowered (the fake picks as AWS does:
 * the instance closest to its next billing hour, i.e. the oldest of one launch).
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { applyConfig } from '../../cli/cluster/apply.js';
import { createCluster } from '../../cli/cluster/create.js';
import { generateConfigFiles } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { AwsInfrastructure } from '../../providers/aws/infrastructure.js';
import { FAKE_IMAGE, startFakeAws, type FakeAws } from '../fakes/aws/server.js';
import { terminationPolicyVictim } from '../fakes/aws/autoscaling.js';
import { fakeOptions } from '../providers/aws/support.js';
import { fillImageMeasurements } from '../support/image-measurements.js';
import { tempDir } from './support/workspace.js';

async function editConfig(ws: string, edit: (doc: ReturnType<typeof parseDocument>) => void): Promise<void> {
  const file = path.join(ws, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  edit(doc);
  await fs.writeFile(file, doc.toString({ lineWidth: 0 }));
}

describe('apply: scaling on AWS', function () {
  this.timeout(60_000);
  let fake: FakeAws;
  let ws: string;
  let infra: AwsInfrastructure;
  const journal = new MemoryResourceJournal();

  beforeEach(async () => {
    fake = await startFakeAws({ lroMs: 5 });
    ws = await tempDir('apply-aws-');
    await generateConfigFiles(ws, 'aws');
    await fillImageMeasurements(ws);
    await editConfig(ws, (doc) => {
      doc.setIn(['image'], FAKE_IMAGE);
      doc.setIn(['provider', 'aws', 'region'], 'us-east-2');
      doc.setIn(['provider', 'aws', 'zone'], 'us-east-2a');
      doc.setIn(['provider', 'aws', 'iamProfileControlPlane'], 'cp-profile');
      doc.setIn(['provider', 'aws', 'iamProfileWorkerNodes'], 'worker-profile');
      doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], 3);
    });
    infra = new AwsInfrastructure(fakeOptions(fake, { region: 'us-east-2' }));
    await createCluster({ workspaceDir: ws, provider: infra, journal, log: nullLogger });
  });
  afterEach(async () => {
    await fake.close();
    await fs.rm(ws, { recursive: true, force: true });
  });

  const workers = async () =>
    (await infra.listInstances({ journal, log: nullLogger, workspaceDir: ws })).filter(
      (i) => i.nodeGroup === 'worker_default' && i.state !== 'terminated',
    );
  const apply = () =>
    applyConfig({
      workspaceDir: ws,
      log: nullLogger,
      journal,
      provider: infra,
      skip: new Set(['init', 'attestationconfig', 'image', 'k8s']),
    });

  it("scales workers out, then in: exactly the newest go (TerminateInstanceInAutoScalingGroup), not the group's own choice", async () => {
    await editConfig(ws, (doc) => doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], 5));
    assert.deepEqual((await apply()).scaled, { worker_default: [3, 5] });
    const five = await workers();
    assert.equal(five.length, 5);
    const newest = [...five]
      .sort((a, b) => b.createdAt!.localeCompare(a.createdAt!))
      .slice(0, 2)
      .map((i) => i.id)
      .sort();
    // What the group would remove if apply lowered its desired capacity instead.
    const group = [...fake.state.autoScalingGroups.values()].find((g) => g.name.includes('worker'))!;
    const live = [...fake.state.instances.values()].filter(
      (i) => i.groupName === group.name && i.terminatedAt === undefined,
    );
    const policyChoice = terminationPolicyVictim(fake.state, group, live);
    assert.ok(!newest.includes(policyChoice.id), 'the termination policy picks an older instance than apply does');

    await editConfig(ws, (doc) => doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], 3));
    assert.deepEqual((await apply()).scaled, { worker_default: [5, 3] });
    const terminated = fake
      .calls('TerminateInstanceInAutoScalingGroup')
      .map((c) => c.params.InstanceId as string)
      .sort();
    assert.deepEqual(terminated, newest);
    assert.ok(
      fake
        .calls('TerminateInstanceInAutoScalingGroup')
        .every((c) => c.params.ShouldDecrementDesiredCapacity === 'true'),
    );
    assert.deepEqual(
      (await workers()).map((i) => i.id).sort(),
      five
        .map((i) => i.id)
        .filter((id) => !newest.includes(id))
        .sort(),
    );
    assert.ok(
      !fake.calls('UpdateAutoScalingGroup').some((c) => Number(c.params.DesiredCapacity) === 3),
      'the desired capacity is never lowered to let the group choose',
    );
  });
});
