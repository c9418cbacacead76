/**
 * Join storm: 50 nodes join one join service at once (gRPC over TLS on 127.0.0.1, a fresh connection per
 * node, the real local-vtpm validator and ticket issuer), next to the cryptographic limit measured in the
 * same run: the time of the cryptography one join needs, done one after another without any service around
 * it (the median round). Node side: ephemeral ECDH key, quote signature (the software AK), opening the JWE.
 * Service side: quote signature check (the validator), ECDH + JWE seal, CSR check + kubelet certificate
 * signature, HKDF. TLS handshakes are not part of the limit: they count as the service's overhead.
 * To show how much of that overhead is the connection alone, the same run measures the connection floor:
 * 50 fresh TLS connections at once to a server with the same credentials, each carrying one plain unary call.
 * Storms and floor runs alternate, so both see the same machine load.
 * Nodes and service share this process (one CPU's worth of work for both sides, like the limit).
 * The nodes' TPMs are software (SoftwareVtpm: ECC P-256 AKs and real TPM quote structures, the same the
 * validator checks from swtpm), because one swtpm per node would measure swtpm, not the join service.
 * Target: storm throughput within 3x of the limit.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { startJoinService } from '../joinservice/server.js';
import { MemoryTokenSink } from '../joinservice/bootstrap-token.js';
import { readServiceFiles } from '../joinservice/service-files.js';
import { generateEphemeralKeyPair, seal, unseal, attestedUserData, joinHelloBoundFields } from '../lib/atls/index.js';
import { createValidator } from '../lib/attestation/registry.js';
import { deriveMeasurementSecret, deriveStateDiskKey } from '../lib/kms/index.js';
import { nullLogger } from '../lib/logging/index.js';
import { signKubeletCertificate } from '../lib/pki/cluster-pki.js';
import type { JoinHello } from '../proto/gen/constellation/join.js';
import { VerifyClient, VerifyService, type GetStatusRequest, type NodeStatus } from '../proto/gen/constellation/verify.js';
import { clientOptions, startTestServer } from '../test/atls/support/wire.js';
import { hello, kubeletCsr, requestTicket } from '../test/joinservice/support/join-client.js';
import { makeServiceDir } from '../test/joinservice/support/service-dir.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from '../test/joinservice/support/software-vtpm.js';

const NODES = 50;
const STORMS = 6;
const CRYPTO_ROUNDS = 200;
const TARGET_RATIO = 3;

interface Node {
  vtpm: SoftwareVtpm;
  hello: JoinHello;
}

export default async function bench(out: (line: string) => void): Promise<void> {
  const pcrs = imagePcrs();
  const service = await makeServiceDir(measurementsFor(pcrs));
  const registry = new TestAkRegistry();
  const nodes: Node[] = [];
  for (let i = 0; i < NODES; i++) {
    const vtpm = new SoftwareVtpm(`node-${i}`, pcrs);
    registry.register(vtpm.instance, vtpm.akPublic);
    nodes.push({ vtpm, hello: hello({ nodeName: `node-${i}`, diskUuid: randomUUID(), certificateRequest: await kubeletCsr([`10.0.1.${i + 1}`]) }) });
  }
  const join = await startJoinService({
    host: '127.0.0.1',
    port: 0,
    filesDir: service.dir,
    validatorDeps: { akRegistry: registry },
    logger: nullLogger,
    tokenSink: new MemoryTokenSink(),
  });
  const address = `127.0.0.1:${join.port}`;
  const plainServer = await startTestServer(VerifyService, {
    getAttestation: (_call: unknown, callback: sendUnaryData<never>) => callback({ code: 12 }),
    getStatus: (_call: ServerUnaryCall<GetStatusRequest, NodeStatus>, callback: sendUnaryData<NodeStatus>) =>
      callback(null, { name: 'bench', role: 'worker', state: 'joined', reason: '', clusterId: '' }),
  });
  const plain = await clientOptions();
  let connections = 0;
  try {
    out(`nodes: ${NODES} software-AK local-vtpm nodes (ECC P-256 AK, TPM quote structures), each joining on its own TLS connection`);
    const storm = () =>
      runAtOnce(nodes, async (node) => {
        const attempt = await requestTicket(address, node.vtpm, node.hello, 'join');
        if (attempt.error) throw attempt.error;
      });
    const connectionFloor = () =>
      runAtOnce(nodes, (): Promise<void> => {
        // Own channel options per client: grpc-js would otherwise share one connection between them.
        const client = new VerifyClient(plainServer.address, plain.credentials, { ...plain.options, 'bench.connection': ++connections });
        return new Promise<void>((resolve, reject) =>
          client.getStatus({}, (err) => {
            client.close();
            if (err) reject(err);
            else resolve();
          }),
        );
      });
    await storm(); // warm-up: JIT, first TLS contexts
    await connectionFloor();
    const storms: Run[] = [];
    const floors: Run[] = [];
    for (let i = 0; i < STORMS; i++) {
      storms.push(await storm());
      floors.push(await connectionFloor());
    }
    const cpuPerJoin = storms.reduce((sum, r) => sum + r.cpu, 0) / (STORMS * NODES);
    const latencies = storms.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const wall = median(storms.map((r) => r.wall));
    const joinsPerSecond = (NODES / wall) * 1000;
    const floorPerCall = median(floors.map((r) => r.wall)) / NODES;

    const crypto = await cryptoPerJoin(nodes[0], await readServiceFiles(service.dir), registry);
    const limitPerSecond = 1000 / crypto.total;
    const ratio = limitPerSecond / joinsPerSecond;
    const perJoin = 1000 / joinsPerSecond;
    out(`join storm (${NODES} at once, median of ${STORMS}): ${joinsPerSecond.toFixed(1)} joins/s, wall ${wall.toFixed(0)} ms; latency p50 ${pct(latencies, 0.5).toFixed(1)} ms, p99 ${pct(latencies, 0.99).toFixed(1)} ms`);
    out(`crypto of one join (sequential, median of ${CRYPTO_ROUNDS} rounds): ${crypto.total.toFixed(2)} ms = node ${crypto.node.toFixed(2)} ms (ECDH key, quote signature, JWE open) + service ${crypto.service.toFixed(2)} ms (quote check ${crypto.validate.toFixed(2)}, ECDH+JWE seal ${crypto.seal.toFixed(2)}, CSR check+cert ${crypto.cert.toFixed(2)}, HKDF ${crypto.hkdf.toFixed(3)})`);
    out(`cryptographic limit: ${limitPerSecond.toFixed(1)} joins/s; storm is ${ratio.toFixed(2)}x below it (target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`);
    out(`connection floor (${NODES} at once: fresh TLS connection + one plain unary call each, no attestation, median of ${STORMS}): ${(1000 / floorPerCall).toFixed(1)} calls/s = ${floorPerCall.toFixed(2)} ms each = ${(floorPerCall / crypto.total).toFixed(2)}x the crypto of a join`);
    out(`storm per join ${perJoin.toFixed(2)} ms = connection floor ${floorPerCall.toFixed(2)} + crypto ${crypto.total.toFixed(2)} + the rest ${(perJoin - floorPerCall - crypto.total).toFixed(2)} (exchange messages, service logic, garbage collection)`);
    // Wall time suffers from whatever else runs on the machine; CPU time per join much less so.
    out(`CPU per join in the storm (both sides, this process): ${cpuPerJoin.toFixed(2)} ms = ${(cpuPerJoin / crypto.total).toFixed(2)}x the crypto; load average ${os.loadavg()[0].toFixed(1)} on ${os.availableParallelism()} CPUs`);
  } finally {
    await plainServer.stop();
    await join.close();
    await service.remove();
  }
}

interface Run {
  wall: number;
  /** CPU time of this process (all threads), ms. */
  cpu: number;
  latencies: number[];
}

/** Starts `task` for every item at once; wall time, CPU time and each task's latency, in ms. */
async function runAtOnce<T>(items: T[], task: (item: T) => Promise<void>): Promise<Run> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  const latencies = await Promise.all(
    items.map(async (item) => {
      const t = performance.now();
      await task(item);
      return performance.now() - t;
    }),
  );
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - start, cpu: (used.user + used.system) / 1000, latencies };
}

/**
 * Milliseconds of each cryptographic step of one join, done in sequence without any service: the median of
 * each step, and as the total the median round (a spike from another process on the machine moves neither).
 */
async function cryptoPerJoin(node: Node, config: Awaited<ReturnType<typeof readServiceFiles>>, registry: TestAkRegistry) {
  const validator = await createValidator('local-vtpm', config.attestation.config, { akRegistry: registry });
  const nonce = new Uint8Array(32).fill(7);
  const binding = { purpose: 'join' as const, nonce };
  const plaintext = new Uint8Array(1500); // about a worker's ticket
  const steps = { node: [] as number[], validate: [] as number[], seal: [] as number[], cert: [] as number[], hkdf: [] as number[] };
  const services: number[] = [];
  const totals: number[] = [];
  const lap = (start: number) => performance.now() - start;
  for (let round = -20; round < CRYPTO_ROUNDS; round++) {
    let t = performance.now();
    const keys = generateEphemeralKeyPair();
    const userData = attestedUserData({ purpose: 'join', publicKey: keys.publicKey, bound: joinHelloBoundFields(node.hello) });
    const document = await node.vtpm.issue(userData, nonce);
    const nodeFirst = lap(t);

    t = performance.now();
    await validator.validate(document, nonce);
    const validate = lap(t);

    t = performance.now();
    signKubeletCertificate(config.pki, node.hello.certificateRequest, { nodeName: node.hello.nodeName, clock: () => new Date() });
    const cert = lap(t);

    t = performance.now();
    deriveStateDiskKey(config.masterSecret, node.hello.diskUuid);
    deriveMeasurementSecret(config.masterSecret);
    const hkdf = lap(t);

    t = performance.now();
    const jwe = seal(plaintext, keys.publicKey, binding);
    const sealTime = lap(t);

    t = performance.now();
    unseal(jwe, keys.privateKey, binding);
    const nodeSecond = lap(t);

    if (round >= 0) {
      steps.node.push(nodeFirst + nodeSecond);
      steps.validate.push(validate);
      steps.seal.push(sealTime);
      steps.cert.push(cert);
      steps.hkdf.push(hkdf);
      services.push(validate + sealTime + cert + hkdf);
      totals.push(nodeFirst + nodeSecond + validate + sealTime + cert + hkdf);
    }
  }
  return {
    node: median(steps.node),
    validate: median(steps.validate),
    seal: median(steps.seal),
    cert: median(steps.cert),
    hkdf: median(steps.hkdf),
    service: median(services),
    total: median(totals),
  };
}

function median(values: number[]): number {
  return pct([...values].sort((a, b) => a - b), 0.5);
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}
