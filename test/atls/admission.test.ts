/**
 * Bounded attestation work (issue 13, item 5): the attack of 1,000 half-open Init streams, each queueing a TPM
 * quote, run against an init server over real gRPC. The attacker comes from 127.0.0.2 (raw HTTP/2, test
 * support raw-grpc.ts), the honest CLI from 127.0.0.1. The TPM is a stand-in that serves one quote at a time
 * and records how many quotes were queued ahead of each, so "the honest quote is not delayed beyond a bound"
 * is asserted as a count, not a time (the time is measured in bench/admission.bench.ts).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { serveCliCall } from '../../bootstrapper/cli-call.js';
import {
  attestedChannelOptions,
  createAttestedClientCredentials,
  ExchangeAdmission,
  initClientAdapter,
  initServerAdapter,
  peerAddress,
  startAttestedServer,
  verifierClient,
  type AttestedServer,
  type ExchangeLimits,
} from '../../lib/atls/index.js';
import type { AttestationDocument, Issuer } from '../../lib/attestation/types.js';
import { createLogger, rateLimitedLogger } from '../../lib/logging/index.js';
import { InitClient, InitRequest, InitService, type InitResponse } from '../../proto/gen/constellation/init.js';
import { FakeAttester, FakeValidator } from './support/fake-attestation.js';
import { openRawSession, type RawCall, type RawSession } from './support/raw-grpc.js';
import { pollUntil } from '../../lib/poll.js';

const PCRS = { '15': '11'.repeat(32) };
const INIT_PATH = '/constellation.init.v1.Init/Init';

/** One quote at a time, as swtpm serves one command at a time; counts the quotes waiting when each starts. */
class SerialTpm implements Issuer {
  readonly variant: string;
  private queue: Promise<unknown> = Promise.resolve();
  waiting = 0;
  quotes = 0;
  constructor(
    private readonly attester: FakeAttester,
    private readonly quoteMs: number,
  ) {
    this.variant = attester.variant;
  }

  /** Issues a document; `ahead` receives how many quotes were queued before this one. */
  issueCounting(userData: Uint8Array, nonce: Uint8Array, ahead: (n: number) => void): Promise<AttestationDocument> {
    ahead(this.waiting);
    this.waiting++;
    const run = this.queue.then(async () => {
      await new Promise((resolve) => setTimeout(resolve, this.quoteMs));
      this.quotes++;
      return this.attester.issue(userData, nonce);
    });
    this.queue = run.catch(() => undefined).finally(() => this.waiting--);
    return run;
  }

  issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument> {
    return this.issueCounting(userData, nonce, () => {});
  }
}

interface Harness {
  server: AttestedServer;
  tpm: SerialTpm;
  log: Array<Record<string, unknown>>;
  /** Quotes queued ahead of each quote, in the order quotes were asked for. */
  ahead: number[];
}

async function startInitServer(limits: ExchangeLimits, attester: FakeAttester): Promise<Harness> {
  const tpm = new SerialTpm(attester, 5);
  const ahead: number[] = [];
  const issuer: Issuer = {
    variant: tpm.variant,
    issue: (userData, nonce) => tpm.issueCounting(userData, nonce, (n) => ahead.push(n)),
  };
  const log: Array<Record<string, unknown>> = [];
  const logger = rateLimitedLogger(
    createLogger((line) => log.push(JSON.parse(line) as Record<string, unknown>)),
    { burst: 3 },
  );
  const server = await startAttestedServer({
    what: 'init server',
    service: InitService,
    implementation: {
      init: (call: ServerDuplexStream<InitRequest, InitResponse>) =>
        void serveCliCall(
          call,
          initServerAdapter,
          { purpose: 'init', issuer, logger, failureMessage: 'init failed', stepTimeoutMs: 30_000 },
          async (session) => {
            session.channel.end();
          },
        ),
    },
    host: '127.0.0.1',
    port: 0,
    shutdownGraceMs: 0,
    limits,
    logger,
  });
  return { server, tpm, log, ahead };
}

/** An honest CLI's init exchange from 127.0.0.1, up to the sealed secrets. */
async function honestInit(port: number, attester: FakeAttester): Promise<void> {
  const client = new InitClient(`127.0.0.1:${port}`, await createAttestedClientCredentials(), {
    ...attestedChannelOptions,
    'grpc.use_local_subchannel_pool': 1,
  });
  try {
    const session = await verifierClient(client.init(), initClientAdapter, {
      purpose: 'init',
      peer: 'the node',
      validator: new FakeValidator({ '15': { expected: PCRS['15'], warnOnly: false } }, [attester.akPublic]),
      secrets: () => new Uint8Array(8),
      timeoutMs: 10_000,
    });
    session.channel.end();
  } finally {
    client.close();
  }
}

/** A Challenge, as the first message of an Init stream: the node answers it with a quote. */
function challenge(): Uint8Array {
  return InitRequest.encode({
    kind: { $case: 'challenge', value: { nonce: randomBytes(32), verifierPublicKey: Buffer.alloc(0) } },
  }).finish();
}

/** 1,000 Init streams from 127.0.0.2 over 10 HTTP/2 sessions, each sending a challenge and nothing more. */
interface HalfOpenAttack {
  /** The status of every stream the server refused at once (the admitted ones stay open). */
  refusals: Array<{ code: number; message: string }>;
  close(): void;
}

async function halfOpenAttack(port: number): Promise<HalfOpenAttack> {
  const sessions: RawSession[] = await Promise.all(
    Array.from({ length: 10 }, () => openRawSession('127.0.0.1', port, '127.0.0.2')),
  );
  const calls: RawCall[] = Array.from({ length: 1000 }, (_, i) => {
    const call = sessions[i % sessions.length].call(INIT_PATH);
    call.send(challenge());
    return call;
  });
  // The 996 refusals come at once; the 4 admitted streams stay open (until the step timeout of 30 s).
  const refusals: Array<{ code: number; message: string }> = [];
  await new Promise<void>((resolve) => {
    for (const call of calls) {
      void call.status.then((status) => {
        refusals.push(status);
        if (refusals.length === 996) resolve();
      });
    }
  });
  return {
    refusals: [...refusals],
    close: () => {
      for (const call of calls) call.cancel();
      for (const session of sessions) session.close();
    },
  };
}

describe('atls/admission: bounded attestation work', () => {
  describe('ExchangeAdmission', () => {
    it('admits up to the limits, per address and in total, and frees a slot exactly once', () => {
      const admission = new ExchangeAdmission('init server', { maxConcurrent: 3, maxPerPeer: 2, idleTimeoutMs: 1000 });
      const a1 = admission.admit('10.0.0.1');
      const a2 = admission.admit('10.0.0.1');
      assert.deepEqual(admission.admit('10.0.0.1'), {
        refused:
          'the init server is busy: 2 calls from 10.0.0.1 are in progress, at most 2 are served at once per address; try again later',
      });
      const b1 = admission.admit('10.0.0.2');
      assert.deepEqual(admission.admit('10.0.0.3'), {
        refused: 'the init server is busy: 3 calls are in progress, at most 3 are served at once; try again later',
      });
      assert.ok('release' in a1 && 'release' in a2 && 'release' in b1);
      a1.release();
      a1.release();
      assert.equal(admission.inFlight, 2);
      assert.ok('release' in admission.admit('10.0.0.1'));
    });

    it('reads the address of grpc-js peer strings', () => {
      assert.equal(peerAddress('127.0.0.1:5000'), '127.0.0.1');
      assert.equal(peerAddress('::ffff:10.0.0.1:5000'), '10.0.0.1');
      assert.equal(peerAddress('::1:5000'), '::1');
      assert.equal(peerAddress('[fd00::1]:5000'), 'fd00::1');
    });
  });

  describe('an init server under 1,000 half-open Init streams', function () {
    // Each case runs the whole attack on a server of its own, so it stands alone.
    this.timeout(60_000);
    const attester = new FakeAttester(PCRS);
    const limits: ExchangeLimits = { maxConcurrent: 16, maxPerPeer: 4, idleTimeoutMs: 10_000 };
    let h: Harness;
    let attack: HalfOpenAttack;

    beforeEach(async () => {
      h = await startInitServer(limits, attester);
      attack = await halfOpenAttack(h.server.port);
    });
    afterEach(async () => {
      attack.close();
      await h.server.close();
    });

    it('refuses all but 4 with RESOURCE_EXHAUSTED, saying why, and quotes for 4 only', async () => {
      assert.equal(attack.refusals.length, 996);
      for (const status of attack.refusals) {
        assert.deepEqual(status, {
          code: 8,
          message:
            'the init server is busy: 4 calls from 127.0.0.2 are in progress, at most 4 are served at once per address; try again later',
        });
      }
      // Every refused stream has its answer, so the server has decided about all 1,000 and no refused one can still
      // ask for a quote: once the admitted 4 have, the count is final.
      await pollUntil(() => (h.ahead.length >= 4 ? true : undefined), {
        timeoutMs: 10_000,
        intervalMs: 10,
        what: 'the 4 admitted quotes',
      });
      assert.equal(h.ahead.length, 4, 'a quote for each admitted stream only');
    });

    it('serves an honest CLI from another address, its quote queued behind at most the 4 admitted ones', async () => {
      await pollUntil(() => h.ahead.length === 4 || undefined, {
        timeoutMs: 10_000,
        intervalMs: 10,
        what: 'the 4 admitted quotes',
      });
      await honestInit(h.server.port, attester);
      assert.equal(h.ahead.length, 5);
      assert.ok(h.ahead[4] <= limits.maxPerPeer, `the honest quote waited behind ${h.ahead[4]} quotes`);
    });

    it('collapses the repeated refusal warnings into a few lines and a count', () => {
      const refusals = h.log.filter((l) => l.msg === 'init server: call refused');
      assert.equal(refusals.length, 3, 'the burst, then nothing');
      assert.ok(refusals.every((l) => l.level === 'warn' && /is busy/.test(String(l.reason))));
    });
  });

  describe('idle streams', () => {
    it('closes a stream that sends nothing with DEADLINE_EXCEEDED and frees its slot', async () => {
      const attester = new FakeAttester(PCRS);
      const h = await startInitServer({ maxConcurrent: 16, maxPerPeer: 1, idleTimeoutMs: 300 }, attester);
      const session = await openRawSession('127.0.0.1', h.server.port, '127.0.0.2');
      try {
        const silent = session.call(INIT_PATH);
        assert.deepEqual(await silent.status, {
          code: 4,
          message: 'the init server closed the stream: no message arrived within 0.3 s',
        });
        assert.equal(h.tpm.quotes, 0);
        const next = session.call(INIT_PATH);
        const refusedOrIdle = await next.status;
        assert.equal(refusedOrIdle.code, 4, 'the slot was free again: the second stream was admitted (and then idle)');
        assert.ok(h.log.some((l) => l.msg === 'init server: idle stream closed' && l.level === 'warn'));
      } finally {
        session.close();
        await h.server.close();
      }
    });
  });
});
