/**
 * Reads through a member's own client ride out a leader change, on three real etcd members
 * (bootstrapper/etcd-member.ts). etcd answers a linearizable read with "leader changed" while leadership moves (as
 * it does when `upgrade apply` or `apply` moves it off a control plane that leaves); a join service that passed that
 * on would fail a join, and its health check would say NOT_SERVING, though the store has a quorum throughout.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EtcdMember } from '../../bootstrapper/etcd-member.js';
import { listMembers, moveLeaderAway, storeHealth } from '../../lib/cluster-store/etcd-members.js';
import { etcdClient, type EtcdConnection } from '../../lib/cluster-store/etcd.js';
import type { ClusterStore } from '../../lib/cluster-store/types.js';
import { generateMasterSecret, generateMeasurementSalt } from '../../lib/kms/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { createClusterPki, loadClusterPki, type ClusterPki } from '../../lib/pki/cluster-pki.js';
import { imageMeasurements } from '../support/measurements.js';

const clock = () => new Date();

describe('etcd cluster store: reads during a leader change (real etcd members)', function () {
  this.timeout(120_000);
  let dir: string;
  let pki: ClusterPki;
  const members: EtcdMember[] = [];
  const stores: ClusterStore[] = [];
  const [x, y] = [100 + randomInt(100), randomInt(256)];

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'etcd-leader-'));
    const pkiFiles = createClusterPki({ clock, clusterName: 'leader-change' });
    pki = loadClusterPki(pkiFiles);
    for (const host of [10, 11, 12]) {
      const name = `control-plane-${host - 10}`;
      members.push(
        new EtcdMember({
          name,
          ip: `127.${x}.${y}.${host}`,
          dir: path.join(dir, name),
          logFile: path.join(dir, `${name}.log`),
          clock,
          logger: nullLogger,
          startTimeoutMs: 30_000,
        }),
      );
    }
    await members[0].create(pki);
    const admin = await members[0].openAsAdmin(pki);
    stores.push(admin);
    await admin.writeJoinConfig({
      attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('aa') } },
      cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.31.1', imageVersion: 'local' },
      measurementSalt: generateMeasurementSalt(),
      masterSecret: generateMasterSecret(),
      joinServiceKey: new Uint8Array(randomBytes(32)),
      pki: pkiFiles,
    });
    for (const member of members.slice(1)) await member.join(pki, [members[0].clientUrl]);
  });

  after(async () => {
    for (const store of stores) await store.close();
    for (const member of members) await member.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a join service reading from its own member sees no failure while leadership moves five times', async () => {
    // What the CLI moves leadership with: an admin certificate and every member's client URL.
    const { caCert, clientCert, clientKey } = (await members[0].adminCredentials(pki)) as EtcdConnection;
    const connection: EtcdConnection = { endpoints: members.map((m) => m.clientUrl), caCert, clientCert, clientKey };
    // Each member's join-service client, as startJoinService opens it: its own member only, no retries of etcd3's.
    for (const member of members) stores.push(await member.open());
    const readers = stores.slice(-3);
    let reads = 0;
    const failures: string[] = [];
    let running = true;
    const loops = readers.map(async (store) => {
      while (running) {
        await store.readJoinConfig().then(
          () => reads++,
          (err: Error) => failures.push(`${err.message} ${String((err.cause as Error)?.message)}`),
        );
      }
    });
    try {
      for (let move = 0; move < 5; move++) {
        const health = await storeHealth(connection);
        const leader = health.members.find((m) => m.leader);
        assert.ok(leader, 'the store has a leader');
        await moveLeaderAway(connection, health, leader.name);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    } finally {
      running = false;
      await Promise.all(loops);
    }
    assert.deepEqual(failures, [], `${failures.length} of ${reads + failures.length} reads failed`);
    assert.ok(reads > 50, `the readers ran (${reads} reads)`);
  });

  it('a control plane that joins through a follower only is promoted (the promotion goes to the leader)', async () => {
    // etcd 3.4 refuses a promotion a follower passes on to the leader when access control is on (etcd issue 20757):
    // asked of the follower, this join would fail after its start timeout.
    const { caCert, clientCert, clientKey } = (await members[0].adminCredentials(pki)) as EtcdConnection;
    const connection: EtcdConnection = { endpoints: members.map((m) => m.clientUrl), caCert, clientCert, clientKey };
    const follower = (await storeHealth(connection)).members.find((m) => !m.leader && !m.isLearner);
    assert.ok(follower, 'the store has a follower');
    const name = 'control-plane-3';
    const fourth = new EtcdMember({
      name,
      ip: `127.${x}.${y}.13`,
      dir: path.join(dir, name),
      logFile: path.join(dir, `${name}.log`),
      clock,
      logger: nullLogger,
      startTimeoutMs: 20_000,
    });
    members.push(fourth);
    await fourth.join(pki, follower.clientUrls);
    const client = await etcdClient(connection);
    try {
      const joined = (await listMembers(client)).find((m) => m.name === name);
      assert.equal(joined?.isLearner, false, 'the fourth member votes');
    } finally {
      client.close();
    }
  });
});
