import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Issuer } from '../../lib/attestation/types.js';
import { AttestationError } from '../../lib/attestation/types.js';
import { createVerifyHandler, requestVerifiedAttestation, verifyUserData } from '../../lib/atls/index.js';
import { UserError } from '../../lib/errors.js';
import { VerifyService } from '../../proto/gen/constellation/verify.js';
import { FakeAttester, FakeValidator } from './support/fake-attestation.js';
import { startTestServer, type TestServer } from './support/wire.js';

describe('atls/verify-service', () => {
  const pcrs = { '15': '11'.repeat(32) };
  const measurements = { '15': { expected: '11'.repeat(32), warnOnly: false } };
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function serve(issuer: Issuer): Promise<string> {
    server = await startTestServer(VerifyService, { ...createVerifyHandler(issuer), getStatus: () => undefined });
    return server.address;
  }

  it('returns a document bound to purpose "verify" and the nonce, which the client validates', async () => {
    const attester = new FakeAttester(pcrs);
    const address = await serve(attester);
    const nonce = randomBytes(32);
    const peer = await requestVerifiedAttestation(address, {
      validator: new FakeValidator(measurements, [attester.akPublic]),
      nonce,
    });
    assert.deepEqual(Buffer.from(peer.result.userData), Buffer.from(verifyUserData(nonce)));
    assert.deepEqual(
      peer.result.comparisons.map((c) => [c.index, c.match]),
      [[15, true]],
    );
  });

  it('rejects a document the node made for an older nonce', async () => {
    const attester = new FakeAttester(pcrs);
    const stale = randomBytes(32);
    const replaying: Issuer = { variant: attester.variant, issue: () => attester.issue(verifyUserData(stale), stale) };
    const address = await serve(replaying);
    await assert.rejects(
      requestVerifiedAttestation(address, { validator: new FakeValidator(measurements, [attester.akPublic]) }),
      AttestationError,
    );
  });

  it('refuses a nonce that is not 32 bytes, with a message', async () => {
    const attester = new FakeAttester(pcrs);
    const address = await serve(attester);
    await assert.rejects(
      requestVerifiedAttestation(address, {
        validator: new FakeValidator(measurements, [attester.akPublic]),
        nonce: new Uint8Array(4),
      }),
      (err: Error) => err instanceof UserError && /must be 32 bytes, got 4/.test(err.message),
    );
  });
});
