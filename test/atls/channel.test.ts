import assert from 'node:assert/strict';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import {
  attestedServer,
  initClientAdapter,
  initServerAdapter,
  PeerFailureError,
  recoverClientAdapter,
  recoverServerAdapter,
  verifierClient,
} from '../../lib/atls/index.js';
import type { Issuer } from '../../lib/attestation/types.js';
import { UserError } from '../../lib/errors.js';
import { InitClient, InitService, type InitRequest, type InitResponse } from '../../proto/gen/constellation/init.js';
import {
  RecoverSecrets,
  RecoveryClient,
  RecoveryService,
  type RecoverRequest,
  type RecoverResponse,
} from '../../proto/gen/constellation/recover.js';
import { FakeAttester, FakeValidator } from './support/fake-attestation.js';
import { clientOptions, recordWire, startTestServer, type TestServer } from './support/wire.js';

const PCRS = { '4': 'aa'.repeat(32) };
const MEASUREMENTS = { '4': { expected: 'aa'.repeat(32), warnOnly: false } };

describe('atls/channel and roles', () => {
  let server: TestServer | undefined;
  const clients: Array<{ close(): void }> = [];
  // Like the CLI, a verifier that gives up cancels its call: closing the client alone leaves a running call open.
  const calls: Array<{ cancel(): void }> = [];
  afterEach(async () => {
    for (const c of calls.splice(0)) c.cancel();
    for (const c of clients.splice(0)) c.close();
    await server?.stop();
    server = undefined;
  });

  async function initAgainst(
    handler: (call: ServerDuplexStream<InitRequest, InitResponse>) => void,
    validatorAk: string,
    overrides: { timeoutMs?: number; randomBytes?: (n: number) => Uint8Array } = {},
  ) {
    server = await startTestServer(InitService, { init: handler });
    const wire = recordWire();
    const { credentials, options } = await clientOptions(wire);
    const client = new InitClient(server.address, credentials, options);
    clients.push(client);
    const call = client.init();
    calls.push(call);
    const attempt = verifierClient(call, initClientAdapter, {
      purpose: 'init',
      peer: 'the node',
      validator: new FakeValidator(MEASUREMENTS, [validatorAk]),
      secrets: () => Buffer.from('secret'),
      timeoutMs: overrides.timeoutMs ?? 10_000,
      randomBytes: overrides.randomBytes,
    });
    return { attempt, wire };
  }

  it('times out a step and sends nothing sealed', async () => {
    const { attempt, wire } = await initAgainst(() => undefined, 'none', { timeoutMs: 200 });
    await assert.rejects(
      attempt,
      (err: Error) =>
        err instanceof UserError && /Timed out .* waiting for the attestation evidence from the node/.test(err.message),
    );
    assert.deepEqual(wire.cases(), ['client:challenge']);
  });

  it("surfaces the node's Failure as a UserError with its message", async () => {
    const broken: Issuer = {
      variant: 'x',
      issue: async () => Promise.reject(new UserError('the TPM is not reachable')),
    };
    const { attempt, wire } = await initAgainst(
      (call) =>
        void attestedServer(call, initServerAdapter, { purpose: 'init', issuer: broken, peer: 'the CLI' }).catch(
          () => undefined,
        ),
      'none',
    );
    await assert.rejects(
      attempt,
      (err: Error) =>
        err instanceof PeerFailureError && err.message === 'The node ended the exchange: the TPM is not reachable',
    );
    assert.deepEqual(wire.cases(), ['client:challenge', 'server:failure']);
  });

  it('makes the attested side refuse a nonce that is not 32 bytes', async () => {
    const attester = new FakeAttester(PCRS);
    let nodeError: unknown;
    const { attempt } = await initAgainst(
      (call) =>
        void attestedServer(call, initServerAdapter, { purpose: 'init', issuer: attester, peer: 'the CLI' }).catch(
          (e) => (nodeError = e),
        ),
      attester.akPublic,
      { randomBytes: () => new Uint8Array(8) },
    );
    await assert.rejects(attempt, /8-byte nonce/);
    assert.ok(nodeError instanceof UserError);
  });

  it('names an unreachable peer', async () => {
    server = await startTestServer(InitService, { init: () => undefined });
    const address = server.address;
    await server.stop();
    server = undefined;
    const { credentials, options } = await clientOptions();
    const client = new InitClient(address, credentials, options);
    clients.push(client);
    await assert.rejects(
      verifierClient(client.init(), initClientAdapter, {
        purpose: 'init',
        peer: `the node at ${address}`,
        validator: new FakeValidator({}, []),
        secrets: () => new Uint8Array(0),
      }),
      (err: Error) => err instanceof UserError && err.message.startsWith(`Could not reach the node at ${address}`),
    );
  });

  it('runs a recover exchange and carries the service message that follows (RecoverDone)', async () => {
    const attester = new FakeAttester(PCRS);
    let received: RecoverSecrets | undefined;
    server = await startTestServer(RecoveryService, {
      recover: (call: ServerDuplexStream<RecoverRequest, RecoverResponse>) =>
        void attestedServer(call, recoverServerAdapter, { purpose: 'recover', issuer: attester, peer: 'the CLI' }).then(
          (session) => {
            received = RecoverSecrets.decode(session.secrets);
            session.channel.sendOther({ kind: { $case: 'done', value: { nodeName: '', diskUuid: 'disk-1' } } });
            session.channel.end();
          },
        ),
    });
    const { credentials, options } = await clientOptions();
    const client = new RecoveryClient(server.address, credentials, options);
    clients.push(client);
    const session = await verifierClient(client.recover(), recoverClientAdapter, {
      purpose: 'recover',
      peer: 'the node',
      validator: new FakeValidator(MEASUREMENTS, [attester.akPublic]),
      secrets: () =>
        RecoverSecrets.encode({ masterKey: Buffer.alloc(32, 7), masterSalt: Buffer.alloc(32, 8) }).finish(),
    });
    const done = await session.channel.receive(['other'], 'the recovery result');
    assert.equal(done.value.kind?.$case === 'done' && done.value.kind.value.diskUuid, 'disk-1');
    assert.deepEqual(received?.masterKey, Buffer.alloc(32, 7));
  });
});
