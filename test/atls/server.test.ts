import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import grpc from '@grpc/grpc-js';
import {
  attestedChannelOptions,
  bindAddress,
  createAttestedClientCredentials,
  createVerifyHandler,
  NODE_SERVICE_LIMITS,
  requestVerifiedAttestation,
  startAttestedServer,
  type AttestedServer,
} from '../../lib/atls/index.js';
import { UserError } from '../../lib/errors.js';
import { VerifyClient, VerifyService } from '../../proto/gen/constellation/verify.js';
import { FakeAttester, FakeValidator } from './support/fake-attestation.js';

describe('atls/server', () => {
  const servers: AttestedServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  const pcrs = { '15': '11'.repeat(32) };
  const attester = new FakeAttester(pcrs);
  const start = async (port: number) => {
    const server = await startAttestedServer({
      what: 'verify service',
      service: VerifyService,
      implementation: { ...createVerifyHandler(attester), getStatus: () => undefined },
      host: '127.0.0.1',
      port,
      shutdownGraceMs: 1_000,
      limits: NODE_SERVICE_LIMITS,
    });
    servers.push(server);
    return server;
  };

  it('binds IPv6 hosts in brackets', () => {
    assert.equal(bindAddress('fd00::1', 9000), '[fd00::1]:9000');
    assert.equal(bindAddress('127.0.0.1', 0), '127.0.0.1:0');
  });

  it('serves attested calls over TLS on the port it picked, and closes once however often asked', async () => {
    const server = await start(0);
    assert.ok(server.port > 0);
    const validator = new FakeValidator({ '15': { expected: '11'.repeat(32), warnOnly: false } }, [attester.akPublic]);
    const peer = await requestVerifiedAttestation(`127.0.0.1:${server.port}`, { validator, nonce: randomBytes(32) });
    assert.deepEqual(
      peer.result.comparisons.map((c) => c.match),
      [true],
    );
    const first = server.close();
    assert.equal(server.close(), first);
    await first;
  });

  it('cuts off a call still running when the grace period ends', async () => {
    let reached!: () => void;
    const running = new Promise<void>((resolve) => (reached = resolve));
    const server = await startAttestedServer({
      what: 'test server',
      service: VerifyService,
      // getStatus never answers: the call runs until the server ends it.
      implementation: { ...createVerifyHandler(attester), getStatus: () => reached() },
      host: '127.0.0.1',
      port: 0,
      shutdownGraceMs: 50,
      limits: NODE_SERVICE_LIMITS,
    });
    const client = new VerifyClient(
      `127.0.0.1:${server.port}`,
      await createAttestedClientCredentials(),
      attestedChannelOptions,
    );
    try {
      const ended = new Promise<grpc.ServiceError>((resolve) =>
        client.getStatus({ knownState: '', waitMs: 0 }, (err) => resolve(err!)),
      );
      await running;
      await server.close();
      const error = await Promise.race([
        ended,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 2_000).unref()),
      ]);
      assert.ok(error, 'the running call was not cut off');
      assert.equal(error.code, grpc.status.UNAVAILABLE);
    } finally {
      client.close();
    }
  });

  it('names the server and the address when the port is taken', async () => {
    const taken = await start(0);
    grpc.setLogVerbosity(grpc.logVerbosity.NONE); // grpc-js would log the failed bind itself
    try {
      await assert.rejects(
        start(taken.port),
        (err: Error) =>
          err instanceof UserError &&
          err.message.startsWith(`The verify service cannot listen on 127.0.0.1:${taken.port}`) &&
          /another process/.test(err.hint ?? ''),
      );
    } finally {
      grpc.setLogVerbosity(grpc.logVerbosity.ERROR);
    }
  });
});
