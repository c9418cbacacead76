/**
 * `constellation create` and `terminate` on AWS as a user runs them: the built CLI in a child process (no terminal),
 * the unmodified AWS SDK pointed at the fake AWS through the environment (AWS_ENDPOINT_URL, static keys,
 * AWS_REGION), a workspace made by `config generate aws` with the fields only an account knows filled in.
 * Also the roll back of a create the cloud refused half-way, and terminate --by-tag.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'mocha';
import { parse, parseDocument } from 'yaml';
import { CONFIG_FILE, RESOURCES_FILE, STATE_FILE } from '../../lib/workspace/files.js';
import { FAKE_CREDENTIALS, FAKE_IMAGE, startFakeAws, type FakeAws } from '../fakes/aws/server.js';
import { list, str, type Params } from '../fakes/aws/wire.js';
import { runCli } from '../support/cli.js';
import { fillImageMeasurements } from '../support/image-measurements.js';

const PORTS = [6443, 9000, 30090, 30081, 9999];

/** Nothing of this machine's AWS setup may leak into the runs. */
const ISOLATED_ENV = {
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
  AWS_CONFIG_FILE: '/nonexistent/config',
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_PROFILE: '',
  AWS_SESSION_TOKEN: '',
  AWS_REGION: 'us-east-2',
};

const QUOTA = {
  action: 'CreateNatGateway',
  code: 'NatGatewayLimitExceeded',
  message: 'The maximum number of NAT gateways has been reached.',
};

describe('constellation create / terminate (AWS, fake cloud)', function () {
  let template: string;
  let fake: FakeAws;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli([...args, '-C', dir], { env });
  const state = async () =>
    parse(await fs.readFile(path.join(dir, STATE_FILE), 'utf8')) as { infrastructure: Record<string, unknown> };
  const journal = async () =>
    (
      JSON.parse(await fs.readFile(path.join(dir, RESOURCES_FILE), 'utf8')) as {
        resources: { kind: string; id: string; name?: string }[];
      }
    ).resources;

  before(async () => {
    // One generated AWS config with image and instance profiles set, copied into each test's workspace.
    template = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-cloud-aws-template-'));
    const gen = await runCli(['config', 'generate', 'aws', '-C', template]);
    assert.equal(gen.code, 0, gen.stderr);
    await fillImageMeasurements(template);
    const file = path.join(template, CONFIG_FILE);
    const doc = parseDocument(await fs.readFile(file, 'utf8'));
    doc.setIn(['image'], FAKE_IMAGE);
    doc.setIn(['provider', 'aws', 'iamProfileControlPlane'], 'demo-control-plane-profile');
    doc.setIn(['provider', 'aws', 'iamProfileWorkerNodes'], 'demo-worker-profile');
    await fs.writeFile(file, doc.toString());
  });
  after(async () => {
    if (template) await fs.rm(template, { recursive: true, force: true });
  });
  beforeEach(async () => {
    // Long-running operations finish at once: the SDK's waiters (5 s between polls) never have to wait.
    fake = await startFakeAws({ lroMs: 0 });
    env = {
      ...ISOLATED_ENV,
      AWS_ENDPOINT_URL: fake.url,
      AWS_ACCESS_KEY_ID: FAKE_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: FAKE_CREDENTIALS.secretAccessKey,
    };
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-cloud-aws-'));
    await fs.cp(template, dir, { recursive: true });
  });
  afterEach(async () => {
    await fake.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('create -y makes the confidential infrastructure tagged with the uid and records the endpoint; terminate -y leaves the cloud empty', async () => {
    const create = await cli('create', '-y');
    assert.equal(create.code, 0, create.stderr);
    const { infrastructure } = await state();
    const uid = String(infrastructure.uid);
    assert.match(uid, /^[0-9a-f]{8}$/);
    const lbAddress = [...fake.state.addresses.values()].find((a) => a.holder?.includes(':loadbalancer/'));
    assert.equal(infrastructure.clusterEndpoint, lbAddress?.publicIp);
    assert.match(
      create.stdout,
      new RegExp(`Created cluster ${uid}; endpoint ${String(infrastructure.clusterEndpoint).replace(/\./g, '\\.')}`),
    );

    const templates = fake.calls('CreateLaunchTemplate');
    assert.equal(templates.length, 2);
    for (const t of templates)
      assert.deepEqual((t.params.LaunchTemplateData as Params).CpuOptions, { AmdSevSnp: 'enabled' }, 'SEV-SNP');
    assert.equal(fake.state.instances.size, 4, '3 control-plane nodes and 1 worker, as the generated config says');
    const tagged = [
      ...fake.state.vpcs.values(),
      ...fake.state.subnets.values(),
      ...fake.state.securityGroups.values(),
      ...fake.state.launchTemplates.values(),
      ...fake.state.loadBalancers.values(),
      ...fake.state.targetGroups.values(),
      ...fake.state.autoScalingGroups.values(),
      ...fake.state.instances.values(),
    ].filter((r) => !('isDefault' in r && r.isDefault));
    assert.ok(tagged.length > 10);
    for (const r of tagged) assert.equal(r.tags['constellation-uid'], uid, JSON.stringify(r));

    const [ingress] = fake.calls('AuthorizeSecurityGroupIngress');
    const tcp = list(ingress.params, 'IpPermissions').filter((p) => p.IpProtocol === 'tcp');
    assert.deepEqual(
      tcp
        .filter((p) => str(p, 'FromPort') === str(p, 'ToPort'))
        .map((p) => Number(str(p, 'FromPort')))
        .sort(),
      [...PORTS].sort(),
      'the security group opens the 5 ports',
    );
    assert.ok(
      tcp.some((p) => str(p, 'FromPort') === '30000' && str(p, 'ToPort') === '32767'),
      'and the NodePort range',
    );
    assert.deepEqual(
      [...fake.state.listeners.values()].map((l) => l.port).sort(),
      [...PORTS].sort(),
      'the load balancer listens on the 5 ports',
    );
    assert.deepEqual([...fake.state.targetGroups.values()].map((g) => g.port).sort(), [...PORTS].sort());

    const terminate = await cli('terminate', '-y');
    assert.equal(terminate.code, 0, terminate.stderr);
    assert.match(terminate.stdout, /Terminated the aws cluster/);
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await journal(), []);
    assert.equal((await state()).infrastructure.uid, '');
  });

  it("a quota error: create reports AWS's message, and with -y rolls back, leaving the cloud empty", async () => {
    fake.fail(QUOTA);
    const create = await cli('create', '-y');
    assert.equal(create.code, 1);
    assert.match(
      create.stderr,
      /Error: .*NatGatewayLimitExceeded: The maximum number of NAT gateways has been reached\./,
    );
    assert.doesNotMatch(create.stderr, /This is a bug/);
    assert.match(create.stdout, /Rolled back/);
    assert.ok(fake.calls('DeleteVpc').length > 0, 'the roll back deleted what create had made');
    assert.deepEqual(fake.live(), []);
    assert.deepEqual(await journal(), []);
    assert.equal((await state()).infrastructure.uid, '');
  });

  it('a quota error without -y and without a terminal: nothing is rolled back, the two commands are printed, and they work', async () => {
    fake.fail(QUOTA);
    const create = await cli('create');
    assert.equal(create.code, 1);
    assert.match(create.stderr, /NatGatewayLimitExceeded: The maximum number of NAT gateways has been reached\./);
    assert.match(create.stdout, /Not rolled back/);
    assert.match(create.stdout, /constellation create -C \S+ +continues/);
    assert.match(create.stdout, /constellation terminate -C \S+ +deletes/);
    assert.equal(fake.calls('DeleteVpc').length, 0);
    const made = fake.live();
    assert.ok(
      made.some((r) => r.startsWith('vpc ')),
      made.join(', '),
    );
    const uid = (await state()).infrastructure.uid;

    // The first command continues with the same cluster: the quota error is gone now.
    const again = await cli('create');
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /Continued the creation of cluster/);
    assert.equal((await state()).infrastructure.uid, uid);
    assert.equal(fake.state.vpcs.size, 1, 'nothing made twice');
    // The second deletes it all.
    const terminate = await cli('terminate', '-y');
    assert.equal(terminate.code, 0, terminate.stderr);
    assert.deepEqual(fake.live(), []);
  });

  it('terminate --by-tag also deletes a resource tagged with the uid that the journal lost', async () => {
    assert.equal((await cli('create', '-y')).code, 0);
    const file = path.join(dir, RESOURCES_FILE);
    const recorded = JSON.parse(await fs.readFile(file, 'utf8')) as { resources: { kind: string; name?: string }[] };
    const lost = recorded.resources.find((r) => r.name === 'target-group-9999');
    assert.ok(lost, JSON.stringify(recorded.resources.map((r) => r.name)));
    recorded.resources = recorded.resources.filter((r) => r !== lost);
    await fs.writeFile(file, JSON.stringify(recorded));

    const terminate = await cli('terminate', '-y', '--by-tag');
    assert.equal(terminate.code, 0, terminate.stderr);
    assert.deepEqual(fake.live(), []);
  });
});

describe('constellation terminate --by-tag (local provider)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-cloud-local-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('is refused before anything is asked or deleted: the local provider has no tags', async () => {
    assert.equal((await runCli(['config', 'generate', 'local', '-C', dir])).code, 0);
    const res = await runCli(['terminate', '--by-tag', '-C', dir]);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /Error: --by-tag works only for a cloud provider: the local provider tags nothing\./);
    assert.match(res.stderr, /Hint: Run `constellation terminate` without --by-tag/);
    assert.doesNotMatch(res.stderr, /terminal/, 'refused before the confirmation');
  });
});
