/**
 * `constellation iam create aws` / `iam destroy` as a user runs them: the built CLI in a child process, the AWS SDK
 * pointed at the fake AWS through the environment (AWS_ENDPOINT_URL and static keys), a workspace in a temp dir.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'mocha';
import { runCli } from '../support/cli.js';
import { FAKE_CREDENTIALS, startFakeAws, type FakeAws } from '../fakes/aws/server.js';

/** Nothing of this machine's AWS setup may leak into the runs. */
const ISOLATED_ENV = {
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
  AWS_CONFIG_FILE: '/nonexistent/config',
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_PROFILE: '',
  AWS_SESSION_TOKEN: '',
  AWS_REGION: 'us-east-2',
};

describe('constellation iam (AWS, fake cloud)', function () {
  let fake: FakeAws;
  let template: string;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const conf = () => path.join(dir, 'constellation-conf.yaml');
  const journal = async () =>
    JSON.parse(await fs.readFile(path.join(dir, 'constellation-resources.json'), 'utf8')) as {
      resources: { kind: string }[];
    };
  const iamNames = () => fake.live().filter((id) => /^(iam-role|instance-profile)/.test(id));

  before(async () => {
    fake = await startFakeAws();
    env = {
      ...ISOLATED_ENV,
      AWS_ENDPOINT_URL: fake.url,
      AWS_ACCESS_KEY_ID: FAKE_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: FAKE_CREDENTIALS.secretAccessKey,
    };
    // One generated AWS config, copied into each test's workspace.
    template = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-iam-template-'));
    const gen = await runCli(['config', 'generate', 'aws', '-C', template]);
    assert.equal(gen.code, 0, gen.stderr);
  });
  after(async () => {
    await fake?.close();
    if (template) await fs.rm(template, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-iam-'));
    await fs.cp(template, dir, { recursive: true });
  });
  afterEach(async () => {
    fake.state.roles.clear();
    fake.state.instanceProfiles.clear();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('iam create aws --update-config -y makes the profiles, fills the config keeping its comments; a re-run changes nothing; iam destroy -y empties IAM', async () => {
    const before = await fs.readFile(conf(), 'utf8');
    const res = await runCli(['iam', 'create', 'aws', '--zone', 'us-west-1b', '--update-config', '-y', '-C', dir], {
      env,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /Created the AWS identities/);
    assert.deepEqual(fake.state.instanceProfiles.get('constellation-control-plane-profile')?.roles, [
      'constellation-control-plane-role',
    ]);
    assert.deepEqual(fake.state.instanceProfiles.get('constellation-worker-profile')?.roles, [
      'constellation-worker-role',
    ]);

    const text = await fs.readFile(conf(), 'utf8');
    assert.match(text, /\n {4}iamProfileControlPlane: constellation-control-plane-profile\n/);
    assert.match(text, /\n {4}iamProfileWorkerNodes: constellation-worker-profile\n/);
    assert.match(
      text,
      /\n {4}region: us-west-1\n {4}# AWS availability zone of the nodes, e.g. us-east-2a.\n {4}zone: us-west-1b\n/,
      'the flags given are written too',
    );
    const comments = (t: string) => t.split('\n').filter((l) => l.trim().startsWith('#'));
    assert.deepEqual(comments(text), comments(before), 'every comment is kept');
    assert.equal((await fs.stat(conf())).mode & 0o777, 0o600);
    assert.ok((await journal()).resources.every((r) => r.kind.startsWith('aws:iam-')));

    const creates = fake.calls('CreateRole').length;
    const again = await runCli(['iam', 'create', 'aws', '--update-config', '-y', '-C', dir], { env });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(fake.calls('CreateRole').length, creates, 'the re-run made no new role');
    assert.equal(await fs.readFile(conf(), 'utf8'), text, 'defaults came from the config: nothing changed');

    const destroy = await runCli(['iam', 'destroy', '-y', '-C', dir], { env });
    assert.equal(destroy.code, 0, destroy.stderr);
    assert.match(destroy.stdout, /Deleted 8 identities \(aws\)/);
    assert.deepEqual(iamNames(), []);
    assert.deepEqual((await journal()).resources, []);
  });

  it('without -y and without a terminal, create and destroy refuse and change nothing', async () => {
    const requests = fake.requests.length;
    const create = await runCli(['iam', 'create', 'aws', '-C', dir], { env });
    assert.equal(create.code, 1);
    assert.match(create.stderr, /no terminal to ask on[\s\S]*Pass -y/);
    assert.equal(fake.requests.length, requests);

    const made = await runCli(['iam', 'create', 'aws', '-y', '--prefix', 'keep', '-C', dir], { env });
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stdout, /Set these under provider\.aws[\s\S]*iamProfileWorkerNodes: keep-worker-profile/);
    assert.match(
      await fs.readFile(conf(), 'utf8'),
      /iamProfileWorkerNodes: ""/,
      'without --update-config the config stays',
    );
    const destroy = await runCli(['iam', 'destroy', '-C', dir], { env });
    assert.equal(destroy.code, 1);
    assert.match(destroy.stdout, /Identities to delete:[\s\S]*aws:iam-role keep-worker-role/);
    assert.match(destroy.stderr, /Pass -y/);
    assert.equal(iamNames().length, 4);
  });

  it('missing credentials: the clear message, and nothing sent', async () => {
    const requests = fake.requests.length;
    const res = await runCli(['iam', 'create', 'aws', '-y', '-C', dir], {
      env: { ...env, AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
    });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /Error: No AWS credentials found/);
    assert.match(res.stderr, /Hint: .*AWS_ACCESS_KEY_ID/);
    assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(fake.requests.length, requests);
  });

  it('never overwrites a file: an existing GCP key file stops iam create gcp before anything is made', async () => {
    const key = path.join(dir, 'gcpServiceAccountKey.json');
    await fs.writeFile(key, '{"mine":true}');
    const res = await runCli(['iam', 'create', 'gcp', '--project', 'p', '-y', '-C', dir], { env });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /gcpServiceAccountKey\.json already exists/);
    assert.equal(await fs.readFile(key, 'utf8'), '{"mine":true}');
    await assert.rejects(fs.access(path.join(dir, 'constellation-resources.json')), 'nothing recorded');
  });

  it('refuses --update-config for a config of another cloud, and flags of another cloud', async () => {
    const gcpOnAws = await runCli(['iam', 'create', 'gcp', '--project', 'p', '--update-config', '-y', '-C', dir], {
      env,
    });
    assert.equal(gcpOnAws.code, 1);
    assert.match(gcpOnAws.stderr, /constellation-conf\.yaml is for aws, not gcp/);
    const flag = await runCli(['iam', 'create', 'aws', '--subscription', 'x', '-y', '-C', dir], { env });
    assert.equal(flag.code, 1);
    assert.match(flag.stderr, /--subscription is not a flag of `iam create aws`[\s\S]*AWS takes --region, --zone/);
  });

  it('iam destroy with nothing recorded says so', async () => {
    const res = await runCli(['iam', 'destroy', '-C', dir], { env });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /nothing to delete/);
  });
});
