import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'mocha';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import type { AwsCredentialsError } from '../../../providers/aws/errors.js';
import provider from '../../../providers/aws/index.js';
import { startFakeAws, type FakeAws } from '../../fakes/aws/server.js';
import { context, createRequest, fakeOptions } from './support.js';

/** Every source of the AWS default credential chain, emptied for a test and restored after. */
const CHAIN_ENV = [
  'AWS_PROFILE',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_SHARED_CREDENTIALS_FILE',
  'AWS_CONFIG_FILE',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_ROLE_ARN',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_EC2_METADATA_DISABLED',
];

describe('aws provider: credentials', function () {
  let fake: FakeAws;
  const saved: Record<string, string | undefined> = {};

  beforeEach(async () => {
    fake = await startFakeAws();
    for (const k of CHAIN_ENV) saved[k] = process.env[k];
    for (const k of CHAIN_ENV) delete process.env[k];
    process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/credentials';
    process.env.AWS_CONFIG_FILE = '/nonexistent/config';
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
  });
  afterEach(async () => {
    for (const k of CHAIN_ENV) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
    await fake.close();
  });

  it('without credentials in the default chain, create names what to set and sends nothing', async () => {
    const infra = new AwsInfrastructure(fakeOptions(fake, { credentials: undefined }));
    await assert.rejects(infra.create(createRequest(), context()), (e: AwsCredentialsError) => {
      assert.equal(e.name, 'AwsCredentialsError');
      assert.match(e.message, /No AWS credentials found/);
      for (const name of ['AWS_PROFILE', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'instance role'])
        assert.ok(e.hint?.includes(name), name);
      return true;
    });
    const iam = await provider.iam!(fakeOptions(fake, { credentials: undefined }));
    await assert.rejects(iam.create({ prefix: 'x', providerConfig: {} }, context()), { name: 'AwsCredentialsError' });
    assert.equal(fake.requests.length, 0);
  });

  it('takes credentials from the environment (default chain) and reports rejected ones as a credentials error', async () => {
    process.env.AWS_ACCESS_KEY_ID = 'AKIDWRONG';
    process.env.AWS_SECRET_ACCESS_KEY = 'wrong';
    const infra = new AwsInfrastructure(fakeOptions(fake, { credentials: undefined }));
    await assert.rejects(infra.create(createRequest(), context()), (e: Error) => {
      assert.equal(e.name, 'AwsCredentialsError', String(e));
      assert.match(e.message, /AuthFailure/);
      return true;
    });
    assert.ok(fake.requests.length > 0, 'the environment credentials were used');
  });
});
