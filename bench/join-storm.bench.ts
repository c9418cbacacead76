/**
 * Join storm (issue 4): 50 nodes join one join service at once: joins per second, p50 and p99 latency, next
 * to the cryptographic limit measured in the same run. Target: the storm's wall time per join (1 / joins per
 * second) within 3x of the limit.
 *
 * The service (gRPC over TLS on 127.0.0.1, the real local-vtpm validator and ticket issuer) runs alone in
 * this process. The nodes run in one separate process (bench/support/node-fleet.ts), because real nodes are
 * other machines: their own work must not be charged to the service. That process starts all joins of a
 * storm at once, each on its own fresh TLS connection, and reports each join's latency. Every storm is 50 new
 * nodes (their own AKs, CSRs and disks), so nothing the service remembers from an earlier storm helps. The
 * nodes' TPMs are software (SoftwareVtpm: ECC P-256 AKs and real TPM quote structures, the same the validator
 * checks from swtpm), because one swtpm per node would measure swtpm, not the join service. Both processes
 * share this machine's CPUs (2 on the team's machines), so the nodes' own work still competes for them.
 *
 * The limit is the cryptography one join needs, done one operation after another with nothing around it
 * (median rounds, each round another node): the attestation of both sides (bench/support/join-crypto.ts)
 * plus the TLS 1.3 handshake of the node's new connection (bench/support/tls-handshake-crypto.ts). HTTP/2
 * framing, protobuf, JSON and the event loop are not cryptography and are not in the limit.
 *
 * `node --cpu-prof --import tsx bench/run.ts join-storm` profiles the service process alone;
 * JOIN_STORM_NODES_CPU_PROF=<dir> profiles the nodes' process.
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { MemoryTokenSink } from '../joinservice/bootstrap-token.js';
import { startJoinService } from '../joinservice/server.js';
import { JoinConfigReader } from '../joinservice/join-config.js';
import { nullLogger } from '../lib/logging/index.js';
import { hello, kubeletCsr } from '../test/joinservice/support/join-client.js';
import { makeTestStore } from '../test/joinservice/support/test-store.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from '../test/joinservice/support/software-vtpm.js';
import { measureJoinCrypto } from './support/join-crypto.js';
import { startNodeFleet, type StormReport } from './support/node-fleet.js';
import { median, percentile, WARM_UP_ROUNDS } from './support/stats.js';
import { checkHandshakeParameters, measureHandshakeCrypto } from './support/tls-handshake-crypto.js';

const NODES = 50;
const STORMS = 6;
const CRYPTO_ROUNDS = 200;
const TARGET_RATIO = 3;

/** A storm as the nodes reported it, with the service process's CPU time during it (ms). */
type TimedStorm = StormReport & { serviceCpu: number };

export default async function bench(out: (line: string) => void): Promise<void> {
  const pcrs = imagePcrs();
  const service = await makeTestStore(measurementsFor(pcrs));
  const registry = new TestAkRegistry();
  const fleet = await startNodeFleet(NODES, STORMS + 1); // + the warm-up storm
  let join: Awaited<ReturnType<typeof startJoinService>> | undefined;
  try {
    for (const node of fleet.nodes)
      registry.register(node.instance, Buffer.from(node.akPublic, 'base64'), 'worker', [node.ip]);
    join = await startJoinService({
      host: '127.0.0.1',
      port: 0,
      store: service.store,
      validatorDeps: { akRegistry: registry },
      logger: nullLogger,
      tokenSink: new MemoryTokenSink(),
    });
    const address = `127.0.0.1:${join.port}`;
    const tlsParameters = await checkHandshakeParameters('127.0.0.1', join.port);
    const storm = async (): Promise<TimedStorm> => {
      const cpu = process.cpuUsage();
      const report = await fleet.storm(address);
      const used = process.cpuUsage(cpu);
      if (report.error) throw new Error(`a join of the storm failed: ${report.error}`);
      return { ...report, serviceCpu: (used.user + used.system) / 1000 };
    };

    await storm(); // warm-up: JIT, first TLS contexts, on both sides
    const storms: TimedStorm[] = [];
    for (let i = 0; i < STORMS; i++) storms.push(await storm());

    const certificateRequest = await kubeletCsr();
    const limitNodes = Array.from({ length: WARM_UP_ROUNDS + CRYPTO_ROUNDS }, (_, i) => {
      const vtpm = new SoftwareVtpm(`limit-node-${i}`, pcrs);
      registry.register(vtpm.instance, vtpm.akPublic);
      return { vtpm, hello: hello({ nodeName: vtpm.instance, diskUuid: randomUUID(), certificateRequest }) };
    });
    const attestation = await measureJoinCrypto(
      limitNodes,
      await new JoinConfigReader(service.store, { logger: nullLogger }).current(),
      registry,
    );
    const handshake = await measureHandshakeCrypto(CRYPTO_ROUNDS);
    const limit = attestation.total + handshake.total;

    const latencies = storms.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const wall = median(storms.map((r) => r.wall));
    const joinsPerSecond = (NODES / wall) * 1000;
    const perJoin = wall / NODES;
    const ratio = perJoin / limit;
    const perJoinCpu = (key: 'cpu' | 'serviceCpu') => storms.reduce((sum, r) => sum + r[key], 0) / (STORMS * NODES);

    const cpus = os.availableParallelism();
    out(
      `machine: ${cpus} CPUs, load average ${os.loadavg()[0].toFixed(1)}; the join service runs alone in this process, the ${NODES} nodes of each storm ` +
        `in one other process (pid ${fleet.pid}); both share the ${cpus} CPUs, with whatever else runs on the machine`,
    );
    out(
      `join storm (${NODES} new nodes at once, each on a fresh TLS connection, median of ${STORMS} storms): ${joinsPerSecond.toFixed(1)} joins/s, ` +
        `per-join wall time ${perJoin.toFixed(2)} ms (wall ${wall.toFixed(0)} ms per storm); latency p50 ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms`,
    );
    out(
      `cryptographic limit: ${limit.toFixed(2)} ms per join = ${(1000 / limit).toFixed(1)} joins/s (median of ${CRYPTO_ROUNDS} rounds, one operation after another, this process), of which:`,
    );
    out(`  attestation, node side: ${attestation.node.toFixed(2)} ms (ECDH key, quote signature, JWE open)`);
    out(
      `  attestation, service side: ${attestation.service.toFixed(2)} ms (quote check ${attestation.validate.toFixed(2)}, ECDH+JWE seal ${attestation.seal.toFixed(2)}, ` +
        `CSR check+kubelet cert ${attestation.cert.toFixed(2)}, HKDF ${attestation.hkdf.toFixed(3)})`,
    );
    out(
      `  TLS handshake (${tlsParameters}), both sides: ${handshake.total.toFixed(2)} ms (X25519 key shares ${handshake.keyShare.toFixed(3)}, ` +
        `CertificateVerify ECDSA P-256 sign+verify ${handshake.signature.toFixed(3)}, HKDF-SHA384 key schedules ${handshake.keySchedule.toFixed(3)})`,
    );
    out(
      `ratio: per-join wall time / limit = ${ratio.toFixed(2)}x (target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`,
    );
    // Wall time suffers from whatever else runs on the machine; CPU time per join much less so.
    const serviceCpu = perJoinCpu('serviceCpu');
    const nodesCpu = perJoinCpu('cpu');
    out(
      `CPU per join in the storms: service process ${serviceCpu.toFixed(2)} ms (${(serviceCpu / limit).toFixed(2)}x the limit), nodes process ${nodesCpu.toFixed(2)} ms; ` +
        `together ${(serviceCpu + nodesCpu).toFixed(2)} ms on ${cpus} CPUs = at best ${((serviceCpu + nodesCpu) / cpus).toFixed(2)} ms of wall time per join`,
    );
  } finally {
    await join?.close();
    await fleet.stop();
    await service.store.close();
  }
}
