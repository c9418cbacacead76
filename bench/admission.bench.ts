/**
 * An honest init exchange while 1,000 half-open Init streams hit the same node (issue 13, item 5): the node's
 * init server over gRPC with a real swtpm behind the real VtpmIssuer, the honest CLI (grpc-js, 127.0.0.1) with
 * the real local-vtpm validator, the attacker in its own process at the HTTP/2 level from 127.0.0.2
 * (bench/support/attacker.ts), each of its streams sending a Challenge and then nothing, so that each admitted one costs a TPM quote and then
 * holds its slot. Per round the attacker opens its 1,000 streams and the honest exchange starts at once.
 *
 * Reported: the honest exchange's latency (median and worst of the rounds) alone, under attack with the
 * server's limits (NODE_SERVICE_LIMITS), and once under attack without limits (the behaviour before: every
 * stream queued a quote); how the attacker's streams ended; the server process's memory growth.
 * Bound: with the limits, the honest quote waits behind at most maxPerPeer of the attacker's quotes, so its
 * exchange must stay within (maxPerPeer + 1) times the exchange alone, plus 50 ms of scheduling.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { serveCliCall } from '../bootstrapper/cli-call.js';
import {
  attestedChannelOptions,
  createAttestedClientCredentials,
  initClientAdapter,
  initServerAdapter,
  NODE_SERVICE_LIMITS,
  startAttestedServer,
  verifierClient,
  type ExchangeLimits,
} from '../lib/atls/index.js';
import { createValidator, localInstanceInfo, VtpmIssuer } from '../lib/attestation/index.js';
import type { Validator } from '../lib/attestation/types.js';
import { nullLogger } from '../lib/logging/index.js';
import { TpmClient } from '../lib/tpm/client.js';
import { TPM_ALG } from '../lib/tpm/constants.js';
import { startSwtpm } from '../lib/tpm/swtpm.js';
import { InitClient, InitService, type InitRequest, type InitResponse } from '../proto/gen/constellation/init.js';
import { startAttacker, type Attacker } from './support/attacker.js';
import { median } from './support/stats.js';

const ATTACK_STREAMS = 1000;
const ROUNDS = 7;
const UNLIMITED: ExchangeLimits = { maxConcurrent: Infinity, maxPerPeer: Infinity, idleTimeoutMs: 60_000 };

export default async function bench(out: (line: string) => void): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-admission-'));
  const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
  const tpm = await TpmClient.connect(swtpm.serverSocket);
  const attacker = await startAttacker();
  try {
    const ak = await tpm.attestationKey();
    const issuer = new VtpmIssuer({ variant: 'local-vtpm', tpm, instanceInfo: localInstanceInfo('cp-0') });
    const pcrs = await tpm.pcrRead(TPM_ALG.SHA256, [4, 8, 9, 11, 12, 13]);
    const measurements = Object.fromEntries(
      [...pcrs].map(([i, v]) => [String(i), { expected: Buffer.from(v).toString('hex'), warnOnly: false }]),
    );
    const validator = await createValidator(
      'local-vtpm',
      { measurements },
      { akRegistry: { lookup: async () => ({ akPublic: ak.publicArea }) } },
    );

    const run = async (limits: ExchangeLimits, rounds: number, attack: Attacker | undefined) => {
      const server = await startAttestedServer({
        what: 'init server',
        service: InitService,
        implementation: {
          init: (call: ServerDuplexStream<InitRequest, InitResponse>) =>
            void serveCliCall(
              call,
              initServerAdapter,
              { purpose: 'init', issuer, logger: nullLogger, failureMessage: 'init failed', stepTimeoutMs: 30_000 },
              async (session) => {
                session.channel.end();
              },
            ),
        },
        host: '127.0.0.1',
        port: 0,
        shutdownGraceMs: 0,
        limits,
      });
      const latencies: number[] = [];
      const endings = new Map<string, number>();
      let rssGrowth = 0;
      try {
        await honestInit(server.port, validator); // warm-up: TLS contexts, JIT
        for (let round = 0; round < rounds; round++) {
          const rss = process.memoryUsage().rss;
          await attack?.attack(server.port, ATTACK_STREAMS);
          const start = performance.now();
          await honestInit(server.port, validator);
          latencies.push(performance.now() - start);
          rssGrowth = Math.max(rssGrowth, process.memoryUsage().rss - rss);
          if (attack)
            for (const [ending, n] of await attack.stop()) endings.set(ending, (endings.get(ending) ?? 0) + n);
        }
      } finally {
        await server.close();
      }
      return { latencies, endings, rssGrowth };
    };

    const alone = await run(NODE_SERVICE_LIMITS, ROUNDS, undefined);
    const limited = await run(NODE_SERVICE_LIMITS, ROUNDS, attacker);
    const unlimited = await run(UNLIMITED, 1, attacker);

    const base = median(alone.latencies);
    const bound = (NODE_SERVICE_LIMITS.maxPerPeer + 1) * base + 50;
    const worst = Math.max(...limited.latencies);
    const fmt = (ms: number) => `${ms.toFixed(0)} ms`;
    out(
      `honest init exchange alone:                          median ${fmt(base)}, worst ${fmt(Math.max(...alone.latencies))} (${ROUNDS} rounds, real swtpm quote)`,
    );
    out(
      `with ${ATTACK_STREAMS} half-open Init streams, limits ${NODE_SERVICE_LIMITS.maxConcurrent}/${NODE_SERVICE_LIMITS.maxPerPeer} per address: median ${fmt(median(limited.latencies))}, worst ${fmt(worst)}  (${(worst / base).toFixed(1)}x alone; bound ${fmt(bound)}: ${worst <= bound ? 'met' : 'NOT met'})`,
    );
    out(`  attacker's streams: ${[...limited.endings].map(([ending, n]) => `${n} ${ending}`).join(', ')}`);
    out(`  server memory growth during a round: ${(limited.rssGrowth / 1024 / 1024).toFixed(1)} MiB`);
    out(
      `without limits (before): ${fmt(unlimited.latencies[0])} (${(unlimited.latencies[0] / base).toFixed(0)}x alone), memory growth ${(unlimited.rssGrowth / 1024 / 1024).toFixed(1)} MiB`,
    );
  } finally {
    await attacker.close();
    tpm.close();
    await swtpm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The honest CLI's init exchange, from 127.0.0.1, up to the sealed secrets the node opens. */
async function honestInit(port: number, validator: Validator): Promise<void> {
  const client = new InitClient(`127.0.0.1:${port}`, await createAttestedClientCredentials(), {
    ...attestedChannelOptions,
    'grpc.use_local_subchannel_pool': 1,
  });
  try {
    const session = await verifierClient(client.init(), initClientAdapter, {
      purpose: 'init',
      peer: 'the node',
      validator,
      secrets: () => new Uint8Array(32),
      timeoutMs: 120_000,
    });
    session.channel.end();
  } finally {
    client.close();
  }
}
