/**
 * Attested channel latency: one full attested exchange (Challenge → Evidence → validate → Sealed → done, the
 * Recover service) against one plain TLS unary gRPC call (Verify.GetStatus) on the same machine, both on a
 * fresh connection each (as init, join and recover are used) and on a warm one. Target: attested <= 5x plain.
 * The attester is swtpm-backed when this machine has swtpm and the vTPM issuer is built, else the software
 * stand-in of the tests; the output says which.
 */
import type { ServerDuplexStream, ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import { attestedServer, recoverClientAdapter, recoverServerAdapter, verifierClient } from '../lib/atls/index.js';
import { RecoverSecrets, RecoveryClient, RecoveryService, type RecoverRequest, type RecoverResponse } from '../proto/gen/constellation/recover.js';
import { VerifyClient, VerifyService, type GetStatusRequest, type NodeStatus } from '../proto/gen/constellation/verify.js';
import { openAttestationKit } from '../test/atls/support/kits.js';
import { clientOptions, startTestServer } from '../test/atls/support/wire.js';

const ROUNDS = 200;
const WARMUP = 20;
const TARGET_RATIO = 5;

export default async function bench(out: (line: string) => void): Promise<void> {
  const kit = await openAttestationKit();
  const validator = kit.validator(Object.fromEntries(kit.measured.map((i) => [String(i), { expected: kit.pcrs[String(i)], warnOnly: false }])));
  const server = await startTestServer({ ...RecoveryService, ...VerifyService } as typeof RecoveryService & typeof VerifyService, {
    recover: (call: ServerDuplexStream<RecoverRequest, RecoverResponse>) =>
      void attestedServer(call, recoverServerAdapter, { purpose: 'recover', issuer: kit.issuer, peer: 'the CLI' }).then(
        (session) => {
          session.channel.sendOther({ kind: { $case: 'done', value: { diskUuid: 'bench' } } });
          session.channel.end();
        },
        () => undefined,
      ),
    getAttestation: (_call: unknown, callback: sendUnaryData<never>) => callback({ code: 12 }),
    getStatus: (_call: ServerUnaryCall<GetStatusRequest, NodeStatus>, callback: sendUnaryData<NodeStatus>) =>
      callback(null, { name: 'bench', role: 'worker', state: 'joined', reason: '', clusterId: '' }),
  });
  const { credentials, options } = await clientOptions();
  const secrets = RecoverSecrets.encode({ masterKey: Buffer.alloc(32, 1), masterSalt: Buffer.alloc(32, 2) }).finish();

  const attested = async (client: RecoveryClient) => {
    const session = await verifierClient(client.recover(), recoverClientAdapter, { purpose: 'recover', peer: 'the node', validator, secrets: () => secrets });
    await session.channel.receive(['other'], 'RecoverDone');
  };
  const plain = (client: VerifyClient) =>
    new Promise<void>((resolve, reject) => client.getStatus({}, (err) => (err ? reject(err) : resolve())));
  const fresh = <C extends { close(): void }>(make: () => C, run: (c: C) => Promise<void>) => async () => {
    const client = make();
    try {
      await run(client);
    } finally {
      client.close();
    }
  };
  // Distinct channel options per client keep grpc-js from sharing one subchannel (connection) between them.
  let n = 0;
  const own = () => ({ ...options, 'bench.connection': ++n });

  try {
    out(`attester: ${kit.description}; ${ROUNDS} rounds each`);
    const warmRecovery = new RecoveryClient(server.address, credentials, options);
    const warmVerify = new VerifyClient(server.address, credentials, options);
    const cases: Array<[string, () => Promise<void>, () => Promise<void>]> = [
      [
        'fresh connection',
        fresh(() => new RecoveryClient(server.address, credentials, own()), attested),
        fresh(() => new VerifyClient(server.address, credentials, own()), plain),
      ],
      ['warm connection', () => attested(warmRecovery), () => plain(warmVerify)],
    ];
    for (const [name, attestedRun, plainRun] of cases) {
      const a = await measure(attestedRun);
      const p = await measure(plainRun);
      const ratio = a.p50 / p.p50;
      out(`${name}: attested exchange p50 ${fmt(a.p50)} p99 ${fmt(a.p99)} | plain TLS call p50 ${fmt(p.p50)} p99 ${fmt(p.p99)}`);
      out(`${name}: ratio p50 ${ratio.toFixed(2)}x, p99 ${(a.p99 / p.p99).toFixed(2)}x (target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`);
    }
    warmRecovery.close();
    warmVerify.close();
  } finally {
    await server.stop();
    await kit.close();
  }
}

async function measure(run: () => Promise<void>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < WARMUP; i++) await run();
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const start = process.hrtime.bigint();
    await run();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((x, y) => x - y);
  return { p50: times[Math.floor(times.length * 0.5)], p99: times[Math.min(times.length - 1, Math.floor(times.length * 0.99))] };
}

function fmt(ms: number): string {
  return `${ms.toFixed(2)} ms`;
}
