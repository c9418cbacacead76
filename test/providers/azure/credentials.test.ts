/**
 * Azure credentials: with no credential anywhere, DefaultAzureCredential's failure becomes a UserError that says
 * what to set; a token Azure rejects becomes one too. The default chain is limited to the developer tools
 * (AZURE_TOKEN_CREDENTIALS=dev) with an empty PATH and HOME, so no credential is found and no request leaves
 * the machine (the managed-identity probe would go to 169.254.169.254).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CREDENTIALS_HINT,
  NoAzureCredentialsError,
  AzureApiError,
  isCredentialUnavailable,
} from '../../../providers/azure/errors.js';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { FakeArm } from '../../fakes/azure/arm-server.js';
import { testContext } from './context.js';
import { createRequest, RESOURCE_GROUP, SUBSCRIPTION } from './fixtures.js';

const CLEARED = [
  'AZURE_CLIENT_ID',
  'AZURE_CLIENT_SECRET',
  'AZURE_TENANT_ID',
  'AZURE_CLIENT_CERTIFICATE_PATH',
  'AZURE_USERNAME',
  'AZURE_FEDERATED_TOKEN_FILE',
  'IDENTITY_ENDPOINT',
  'MSI_ENDPOINT',
];

describe('azure credentials', function () {
  let fake: FakeArm;
  let emptyDir: string;
  const saved: Record<string, string | undefined> = {};

  before(async function () {
    fake = await FakeArm.start();
    fake.seed(`/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`, {
      location: 'westeurope',
      properties: { provisioningState: 'Succeeded' },
    });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    emptyDir = mkdtempSync(path.join(os.tmpdir(), 'azure-cred-'));
  });

  after(async function () {
    await fake.stop();
    rmSync(emptyDir, { recursive: true, force: true });
  });

  beforeEach(function () {
    for (const name of [...CLEARED, 'AZURE_TOKEN_CREDENTIALS', 'PATH', 'HOME']) saved[name] = process.env[name];
  });

  afterEach(function () {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('says what to set when DefaultAzureCredential finds no credential', async function () {
    for (const name of CLEARED) delete process.env[name];
    process.env.AZURE_TOKEN_CREDENTIALS = 'dev';
    process.env.PATH = emptyDir;
    process.env.HOME = emptyDir;
    const { credential: _ignored, ...withoutCredential } = fake.providerOptions();
    const infra = new AzureInfrastructure(parseAzureOptions(withoutCredential));
    const before = fake.requests.length;

    const err = await infra.create(createRequest(), testContext()).then(
      () => assert.fail('create succeeded without credentials'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NoAzureCredentialsError, String(err));
    assert.match(err.message, /No Azure credentials found/);
    assert.match(err.hint ?? '', /az login/);
    assert.match(err.hint ?? '', /AZURE_CLIENT_ID/);
    assert.equal(fake.requests.length, before, 'no request was sent without a token');
  });

  it('recognizes credential-unavailable errors, also when wrapped', function () {
    const unavailable = Object.assign(new Error('no az'), { name: 'CredentialUnavailableError' });
    const aggregate = Object.assign(new Error('chain failed'), {
      name: 'AggregateAuthenticationError',
      errors: [unavailable, unavailable],
    });
    assert.equal(isCredentialUnavailable(aggregate), true);
    assert.equal(isCredentialUnavailable(new Error('outer', { cause: unavailable })), true);
    const wrongSecret = Object.assign(new Error('AADSTS7000215: Invalid client secret'), {
      name: 'AuthenticationError',
    });
    assert.equal(
      isCredentialUnavailable(
        Object.assign(new Error('chain'), { name: 'AggregateAuthenticationError', errors: [unavailable, wrongSecret] }),
      ),
      false,
    );
  });

  it('reports a token Azure rejects, with the credentials hint', async function () {
    const infra = new AzureInfrastructure(
      parseAzureOptions(
        fake.providerOptions({
          credential: { getToken: async () => ({ token: 'expired', expiresOnTimestamp: Date.now() + 3600_000 }) },
        }),
      ),
    );
    const err = await infra.create(createRequest(), testContext()).then(
      () => assert.fail('create succeeded with a bad token'),
      (e: unknown) => e as Error & { cause?: unknown; hint?: string },
    );
    assert.match(err.message, /Azure rejected the credentials/);
    // Found when create reads the image definition, before anything is made: nothing to roll back.
    assert.ok(err instanceof AzureApiError, String(err));
    assert.equal(fake.requests.filter((r) => r.method === 'PUT').length, 0);
    assert.ok(err.hint?.startsWith(CREDENTIALS_HINT), err.hint);
  });
});
