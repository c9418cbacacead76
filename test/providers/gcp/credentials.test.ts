/**
 * Credentials of the GCP provider: without an auth client the SDK's application default credentials are
 * used; when there are none, or GOOGLE_APPLICATION_CREDENTIALS names a missing file, or GCP rejects the token,
 * the user gets a UserError naming what to set. The metadata-server probe is switched off
 * (METADATA_SERVER_DETECTION=none), so nothing leaves the machine.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OAuth2Client } from 'google-auth-library';
import { GcpCredentialsError } from '../../../providers/gcp/errors.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, providerContext } from './support.js';

const ENV_KEYS = [
  'GOOGLE_APPLICATION_CREDENTIALS',
  'HOME',
  'CLOUDSDK_CONFIG',
  'METADATA_SERVER_DETECTION',
  'GOOGLE_CLOUD_PROJECT',
] as const;

describe('GCP credentials', () => {
  let fake: FakeGcp;
  let home: string;
  const saved: Partial<Record<(typeof ENV_KEYS)[number], string>> = {};

  before(async () => {
    fake = await FakeGcp.start();
    home = mkdtempSync(path.join(os.tmpdir(), 'gcp-creds-'));
    for (const key of ENV_KEYS) saved[key] = process.env[key];
    process.env.HOME = home;
    process.env.CLOUDSDK_CONFIG = path.join(home, 'gcloud');
    process.env.METADATA_SERVER_DETECTION = 'none';
    delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  });
  after(async () => {
    for (const key of ENV_KEYS) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
    rmSync(home, { recursive: true, force: true });
    await fake.close();
  });

  const withoutAuthClient = () => ({ ...fake.providerOptions(), authClient: undefined });

  it('names GOOGLE_APPLICATION_CREDENTIALS and gcloud when no application default credentials exist', async () => {
    const infra = new GcpInfrastructure(withoutAuthClient());
    const err = await infra.create(createRequest(), providerContext()).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof GcpCredentialsError, String(err));
    assert.match(err.message, /No Google application default credentials/);
    assert.match(err.hint ?? '', /GOOGLE_APPLICATION_CREDENTIALS/);
    assert.match(err.hint ?? '', /gcloud auth application-default login/);
    assert.equal(fake.requests.length, 0);
  });

  it('says so when GOOGLE_APPLICATION_CREDENTIALS names a file that does not exist', async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = path.join(home, 'missing-key.json');
    try {
      const infra = new GcpInfrastructure(withoutAuthClient());
      const err = await infra.terminate(providerContext()).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof GcpCredentialsError, String(err));
      assert.match(err.message, /GOOGLE_APPLICATION_CREDENTIALS/);
      assert.match(err.message, /missing-key\.json/);
    } finally {
      delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    }
  });

  it('uses provider.gcp.serviceAccountKeyPath (relative to the workspace) and says when it cannot be read', async () => {
    const infra = new GcpInfrastructure(withoutAuthClient());
    const request = createRequest();
    request.providerConfig = { ...request.providerConfig, serviceAccountKeyPath: 'gcpServiceAccountKey.json' };
    const ctx = { ...providerContext(), workspaceDir: home };
    const err = await infra.create(request, ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof GcpCredentialsError, String(err));
    assert.match(err.message, /service-account key file .* cannot be used/);
    assert.ok(err.message.includes(path.join(home, 'gcpServiceAccountKey.json')));
  });

  it('reports credentials GCP rejects (401) as a credentials problem', async () => {
    const stale = new OAuth2Client();
    stale.setCredentials({ access_token: 'revoked-token', expiry_date: Date.now() + 3600_000 });
    const infra = new GcpInfrastructure({ ...fake.providerOptions(), authClient: stale });
    const err = await infra.create(createRequest(), providerContext()).then(
      () => undefined,
      (e: unknown) => e,
    );
    // Found before anything is made: nothing to roll back.
    assert.ok(err instanceof GcpCredentialsError, String(err));
    assert.equal(fake.calls(/^POST /).length, 0);
    assert.match(err.message, /GCP rejected the credentials/);
    assert.doesNotMatch(err.message, /revoked-token/);
  });
});
