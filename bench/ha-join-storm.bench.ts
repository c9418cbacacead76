/**
 * Join storm through a highly available control plane (issue 10): 50 new nodes join at once through a TCP load
 * balancer in front of three join services, each reading the cluster store from its own member of a real
 * three-member etcd cluster (TLS from the cluster's etcd CA; every join: a quorum read of the join configuration,
 * the disk claim and the node record, both written with consensus). Compared in the same run with one join service
 * whose store is in memory (the figure before the store existed). Target: joins/s through three ≥ joins/s of one.
 *
 * Everything runs in this process but the nodes (bench/support/node-fleet.ts), which share the machine's CPUs:
 * three join services in one process use the same CPUs as one, so the ratio shows what the store costs.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EtcdMember } from '../bootstrapper/etcd-member.js';
import { MemoryTokenSink } from '../joinservice/bootstrap-token.js';
import { startJoinService, type JoinServiceHandle } from '../joinservice/server.js';
import type { ClusterStore } from '../lib/cluster-store/types.js';
import { nullLogger } from '../lib/logging/index.js';
import { createClusterPki, loadClusterPki } from '../lib/pki/cluster-pki.js';
import { startLoadBalancer } from '../providers/local/load-balancer.js';
import { makeTestStore } from '../test/joinservice/support/test-store.js';
import { loopbackPrefixes } from '../test/providers/local/support.js';
import { imagePcrs, measurementsFor, TestAkRegistry } from '../test/joinservice/support/software-vtpm.js';
import { startNodeFleet } from './support/node-fleet.js';
import { median } from './support/stats.js';

const NODES = 50;
const STORMS = 4;
const PORT = 30090;

export default async function bench(out: (line: string) => void): Promise<void> {
  const test = await makeTestStore(measurementsFor(imagePcrs()));
  // A PKI valid now (etcd checks its certificates' times; the test store's is made for a fixed future date).
  test.contents.pki = createClusterPki({ clock: () => new Date(), clusterName: 'bench' });
  await test.store.writeJoinConfig({ pki: test.contents.pki });
  const registry = new TestAkRegistry();
  // Two warm-up storms (one per setup) and the measured ones.
  const fleet = await startNodeFleet(NODES, 2 * STORMS + 2);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-bench-ha-'));
  const members: EtcdMember[] = [];
  const services: JoinServiceHandle[] = [];
  const stores: ClusterStore[] = [];
  const closers: Array<() => Promise<void>> = [];
  try {
    for (const node of fleet.nodes)
      registry.register(node.instance, Buffer.from(node.akPublic, 'base64'), 'worker', [node.ip]);
    const serve = async (host: string, store: ClusterStore) => {
      const service = await startJoinService({
        host,
        port: PORT,
        store,
        validatorDeps: { akRegistry: registry },
        logger: nullLogger,
        tokenSink: new MemoryTokenSink(),
      });
      services.push(service);
    };
    const storms = async (address: string) => {
      await fleet.storm(address); // warm-up
      const walls: number[] = [];
      for (let i = 0; i < STORMS; i++) {
        const report = await fleet.storm(address);
        if (report.error) throw new Error(`a join of the storm failed: ${report.error}`);
        walls.push(report.wall);
      }
      return (NODES / median(walls)) * 1000;
    };

    // A free address range (other clusters or benches may run).
    const prefix = await freePrefix();
    await serve(`${prefix}.20`, test.store);
    const single = await storms(`${prefix}.20:${PORT}`);

    // Three control planes: etcd members 10, 11, 12 (the first creates the store, the others join as learners).
    const pki = loadClusterPki(test.contents.pki);
    for (const host of [10, 11, 12]) {
      members.push(
        new EtcdMember({
          name: `cp-${host}`,
          ip: `${prefix}.${host}`,
          dir: path.join(dir, `cp-${host}`),
          logFile: path.join(dir, `etcd-${host}.log`),
          clock: () => new Date(),
          logger: nullLogger,
        }),
      );
    }
    await members[0].create(pki);
    // As init does: the join configuration through an admin client; the join services then read it as their own user.
    const admin = await members[0].openAsAdmin(pki);
    try {
      await admin.writeJoinConfig(test.contents);
    } finally {
      await admin.close();
    }
    const first = await members[0].open();
    stores.push(first);
    for (const member of members.slice(1)) await member.join(pki, [members[0].clientUrl]);
    for (const [i, member] of members.entries()) {
      const store = i === 0 ? first : await member.open();
      if (i > 0) stores.push(store);
      await serve(`${prefix}.${10 + i}`, store);
    }
    const lb = await startLoadBalancer({
      host: `${prefix}.1`,
      ports: [PORT],
      backends: () => [10, 11, 12].map((h) => `${prefix}.${h}`),
    });
    closers.push(() => lb.close());
    const three = await storms(`${prefix}.1:${PORT}`);

    const ratio = three / single;
    out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)}`);
    out(
      `one join service, store in memory: ${single.toFixed(1)} joins/s (${NODES} nodes at once, median of ${STORMS} storms)`,
    );
    out(`three join services behind a load balancer, store in a 3-member etcd cluster: ${three.toFixed(1)} joins/s`);
    out(`ratio ${ratio.toFixed(2)}x (target ≥ 1: ${ratio >= 1 ? 'met' : 'NOT met'})`);
  } finally {
    for (const close of closers) await close();
    for (const service of services) await service.close();
    for (const store of stores) await store.close();
    for (const member of members) await member.close();
    await fleet.stop();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** An address range 127.0.N.0/24 where nothing listens on the bench's addresses yet. */
async function freePrefix(): Promise<string> {
  const net = await import('node:net');
  for (const prefix of loopbackPrefixes()) {
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(PORT, `${prefix}.1`, () => server.close(() => resolve(true)));
    });
    if (free) return prefix;
  }
  throw new Error('no free 127.0.N.0/24 range');
}
