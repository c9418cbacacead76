/**
 * Least privilege in the etcd cluster store, on real etcd members (bootstrapper/etcd-member.ts): every certificate
 * below comes from the cluster's etcd CA, and each gets only what its role needs (lib/cluster-store/etcd-access.ts).
 * A second control plane joins through the first (MemberAdd and MemberPromote need the admin role).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EtcdMember } from '../../bootstrapper/etcd-member.js';
import { enableAccessControl, ETCD_JOIN_SERVICE_USER } from '../../lib/cluster-store/etcd-access.js';
import {
  EtcdClusterStore,
  StoreAccessDeniedError,
  etcdClient,
  STORE_PREFIX,
  type EtcdConnection,
} from '../../lib/cluster-store/etcd.js';
import type { ClusterStore, JoinConfig } from '../../lib/cluster-store/types.js';
import { generateMasterSecret, generateMeasurementSalt } from '../../lib/kms/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import {
  createClusterPki,
  issueEtcdClientCertificate,
  issueEtcdMemberCertificates,
  loadClusterPki,
  type ClusterPki,
  type PkiFiles,
} from '../../lib/pki/cluster-pki.js';
import { imageMeasurements } from '../support/measurements.js';

const clock = () => new Date();
const MASTER_SECRET_KEY = `${STORE_PREFIX}join/master-secret`;

describe('etcd cluster store: least privilege (real etcd members)', function () {
  this.timeout(90_000);
  let dir: string;
  let pkiFiles: PkiFiles;
  let pki: ClusterPki;
  let first: EtcdMember;
  let second: EtcdMember | undefined;
  const stores: ClusterStore[] = [];
  const address = (() => {
    const [x, y] = [100 + randomInt(100), randomInt(256)];
    return (host: number) => `127.${x}.${y}.${host}`;
  })();

  function member(name: string, host: number): EtcdMember {
    return new EtcdMember({
      name,
      ip: address(host),
      dir: path.join(dir, name),
      logFile: path.join(dir, `${name}.log`),
      clock,
      logger: nullLogger,
      startTimeoutMs: 30_000,
    });
  }

  /** A store client with a certificate of the etcd CA whose common name is `commonName`. */
  async function clientAs(commonName: string): Promise<ClusterStore> {
    const cert = issueEtcdClientCertificate(pki, { commonName, clock });
    return track(await EtcdClusterStore.connect(connection(cert)));
  }

  function connection(cert: { cert: string; key: string }): EtcdConnection {
    return {
      endpoints: [first.clientUrl],
      caCert: pkiFiles['etcd/ca.crt'],
      clientCert: cert.cert,
      clientKey: cert.key,
    };
  }

  function track(store: ClusterStore): ClusterStore {
    stores.push(store);
    return store;
  }

  function joinConfig(): JoinConfig {
    return {
      attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('aa') } },
      cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.31.1', imageVersion: 'local' },
      measurementSalt: generateMeasurementSalt(),
      masterSecret: generateMasterSecret(),
      joinServiceKey: new Uint8Array(randomBytes(32)),
      pki: pkiFiles,
    };
  }

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'etcd-access-'));
    pkiFiles = createClusterPki({ clock, clusterName: 'least-privilege' });
    pki = loadClusterPki(pkiFiles);
    first = member('control-plane-0', 10);
    await first.create(pki, { alone: true }); // as init creates it when the provider lists no other control plane
    // What init does: the join configuration, written with an admin certificate made in memory.
    const admin = track(await first.openAsAdmin(pki));
    await admin.writeJoinConfig(joinConfig());
  });

  after(async () => {
    for (const store of stores) await store.close();
    await second?.close();
    await first?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('the join service reads the join configuration and writes claims, node records and upgrades, but cannot change the join configuration', async () => {
    const joinService = track(await first.open());
    const { config } = await joinService.readJoinConfig();
    assert.equal(config.cluster.kubernetesVersion, 'v1.31.1');
    assert.equal(await joinService.claimDisk(randomUUID(), 'worker-0'), 'worker-0');
    await joinService.putNode({
      name: 'worker-0',
      role: 'worker',
      diskUuid: randomUUID(),
      joinedAt: clock().toISOString(),
      lastEntry: 'join',
      lastEntryAt: clock().toISOString(),
    });
    assert.equal((await joinService.getNode('worker-0'))?.name, 'worker-0');
    const upgrade = { version: 'v1.32.1', from: 'v1.31.1', requestedAt: clock().toISOString(), nodes: {} };
    assert.equal(await joinService.swapKubernetesUpgrade(upgrade, undefined), true);
    assert.deepEqual(await joinService.memberEndpoints(), [first.clientUrl]);

    const empty = { variant: 'local-vtpm', config: { measurements: imageMeasurements('00') } };
    await assert.rejects(joinService.writeJoinConfig({ attestation: empty }), StoreAccessDeniedError);
    assert.deepEqual(
      (await joinService.readJoinConfig()).config.attestation,
      joinConfig().attestation,
      'the measurements are unchanged',
    );
  });

  it("the CLI's certificate (constellation-store.json) may write the join configuration", async () => {
    const credentials = await first.adminCredentials(pki);
    assert.equal(credentials.backend, 'etcd');
    const cli = track(await EtcdClusterStore.connect(credentials as EtcdConnection));
    const attestation = { variant: 'local-vtpm', config: { measurements: imageMeasurements('bb') } };
    await cli.writeJoinConfig({ attestation });
    assert.deepEqual((await cli.readJoinConfig()).config.attestation, attestation);
    await cli.writeJoinConfig({ attestation: joinConfig().attestation });
  });

  it('enabling access control again (a retried init) takes what exists as done and changes no rule', async () => {
    const admin = await etcdClient((await first.adminCredentials(pki)) as EtcdConnection);
    try {
      await enableAccessControl(admin);
    } finally {
      admin.close();
    }
    const joinService = track(await first.open());
    assert.equal((await joinService.readJoinConfig()).config.cluster.kubernetesVersion, 'v1.31.1');
    const empty = { variant: 'local-vtpm', config: { measurements: imageMeasurements('00') } };
    await assert.rejects(joinService.writeJoinConfig({ attestation: empty }), StoreAccessDeniedError);
  });

  it("a member's own peer or server certificate, and a certificate of any other name, read and write nothing", async () => {
    const { server, peer } = issueEtcdMemberCertificates(pki, { name: 'root', ips: [address(10)], clock });
    for (const [what, cert] of [
      ['peer', peer],
      ['server', server],
      ['worker-0', issueEtcdClientCertificate(pki, { commonName: 'worker-0', clock })],
    ] as const) {
      const client = await etcdClient(connection(cert));
      try {
        await assert.rejects(
          client.get(MASTER_SECRET_KEY).string(),
          /permission denied|user name not found/i,
          `${what} reads no master secret`,
        );
        await assert.rejects(
          client.put(`${STORE_PREFIX}join/attestation-config`).value('{}').exec(),
          /permission denied|user name not found/i,
          `${what} writes no measurements`,
        );
      } finally {
        client.close();
      }
    }
    const stranger = await clientAs('worker-0');
    await assert.rejects(
      stranger.readJoinConfig(),
      (err: Error) => err instanceof StoreAccessDeniedError && /refused the request/.test(err.message),
    );
  });

  it("the join service's user reads no key outside its prefixes", async () => {
    const client = await etcdClient(
      connection(issueEtcdClientCertificate(pki, { commonName: ETCD_JOIN_SERVICE_USER, clock })),
    );
    try {
      await assert.rejects(client.get('/other/secret').string(), /permission denied/i);
      await assert.rejects(
        client.getAll().prefix(STORE_PREFIX).keys(),
        /permission denied/i,
        'no read of the whole store',
      );
    } finally {
      client.close();
    }
  });

  /** The raft timing flags and the PID of the running etcd whose data folder is below `name`'s folder. */
  async function raftFlagsOf(name: string): Promise<{ pid: number; flags: string[] }> {
    const dataDir = `--data-dir=${path.join(dir, name, 'data')}`;
    for (const entry of await fs.readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const argv = await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').then(
        (text) => text.split('\0'),
        (): string[] => [],
      );
      if (argv.includes(dataDir))
        return { pid: Number(entry), flags: argv.filter((a) => /^--(heartbeat-interval|election-timeout)=/.test(a)) };
    }
    throw new Error(`no etcd runs on ${dataDir}`);
  }

  it('the member init created runs on short raft timeouts while alone, and starts again on the peer timeouts (its data kept) before a control plane is told where to join', async () => {
    const alone = await raftFlagsOf('control-plane-0');
    assert.deepEqual(alone.flags, ['--heartbeat-interval=20', '--election-timeout=100']);
    // Two control planes asking for tickets at once share one restart.
    await Promise.all([first.beforePeerJoins(), first.beforePeerJoins()]);
    const withPeers = await raftFlagsOf('control-plane-0');
    assert.deepEqual(withPeers.flags, ['--heartbeat-interval=100', '--election-timeout=1000']);
    assert.notEqual(withPeers.pid, alone.pid);
    const joinService = track(await first.open());
    assert.equal((await joinService.readJoinConfig()).config.cluster.apiServerEndpoint, '10.0.0.1:6443');
    await first.beforePeerJoins();
    assert.equal((await raftFlagsOf('control-plane-0')).pid, withPeers.pid, 'started again only once');
  });

  it('a second control plane joins through the first (membership changes with an in-memory admin certificate) and serves its join service', async () => {
    second = member('control-plane-1', 11);
    await second.join(pki, [first.clientUrl]);
    const joinService = track(await second.open());
    assert.equal((await joinService.readJoinConfig()).config.cluster.apiServerEndpoint, '10.0.0.1:6443');
    assert.equal((await joinService.memberEndpoints()).length, 2);
    const files = await fs.readdir(path.join(dir, 'control-plane-1', 'pki'));
    assert.deepEqual(
      files.sort(),
      ['ca.crt', 'client.crt', 'client.key', 'peer.crt', 'peer.key', 'server.crt', 'server.key'],
      'no admin certificate on the disk',
    );
  });
});
