/**
 * What every cluster store promises (lib/cluster-store/types.ts), checked with the same cases against each backend:
 * the memory store, the etcd store on a real single-member etcd (mutual TLS from the cluster's etcd CA) and the
 * Kubernetes store on the fake Kubernetes API server (test/fakes/kubernetes) through the real client.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { EtcdClusterStore, STORE_PREFIX } from '../../lib/cluster-store/etcd.js';
import { KubernetesClusterStore } from '../../lib/cluster-store/kubernetes.js';
import { MemoryClusterStore } from '../../lib/cluster-store/memory.js';
import {
  StoreNotInitializedError,
  StoreUnavailableError,
  type ClusterStore,
  type JoinConfig,
  type KubernetesUpgrade,
  type NodeRecord,
} from '../../lib/cluster-store/types.js';
import { etcdClient } from '../../lib/cluster-store/etcd.js';
import { generateMasterSecret, generateMeasurementSalt } from '../../lib/kms/index.js';
import {
  createAdminKubeconfig,
  createClusterPki,
  loadClusterPki,
  type ClusterPki,
  type PkiFiles,
} from '../../lib/pki/cluster-pki.js';
import { FakeKubernetesApi } from '../fakes/kubernetes/api-server.js';
import { EtcdProcess } from './support/etcd-process.js';
import { imageMeasurements } from '../support/measurements.js';
import { pollUntil } from '../../lib/poll.js';

const clock = () => new Date();
const PKI_FILES: PkiFiles = createClusterPki({ clock, clusterName: 'contract' });
const PKI: ClusterPki = loadClusterPki(PKI_FILES);

function joinConfig(): JoinConfig {
  return {
    attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('aa') } },
    cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.31.1', imageVersion: 'local' },
    measurementSalt: generateMeasurementSalt(),
    masterSecret: generateMasterSecret(),
    joinServiceKey: new Uint8Array(randomBytes(32)),
    pki: PKI_FILES,
  };
}

function node(name: string, over: Partial<NodeRecord> = {}): NodeRecord {
  return {
    name,
    role: 'worker',
    diskUuid: randomUUID(),
    joinedAt: '2030-01-02T03:04:05.000Z',
    lastEntry: 'join',
    lastEntryAt: '2030-01-02T03:04:05.000Z',
    ...over,
  };
}

function kubernetesUpgrade(over: Partial<KubernetesUpgrade> = {}): KubernetesUpgrade {
  return { version: 'v1.32.10', from: 'v1.31.14', requestedAt: '2030-01-02T03:04:05.000Z', nodes: {}, ...over };
}

/** One backend as the cases see it: a fresh, empty store per case, more clients of it, and its availability. */
interface Backend {
  /** A client of an empty store. */
  fresh(): Promise<ClusterStore>;
  /** Another client of the same store (another join service). */
  another(): Promise<ClusterStore>;
  setAvailable(available: boolean): Promise<void>;
  /** Closes the clients of the case. */
  done(): Promise<void>;
}

const backends: { name: string; setup: () => Promise<{ backend: Backend; teardown: () => Promise<void> }> }[] = [
  {
    name: 'memory',
    setup: async () => {
      let store = new MemoryClusterStore();
      const backend: Backend = {
        fresh: async () => (store = new MemoryClusterStore()),
        another: async () => store,
        setAvailable: async (available) => void (store.available = available),
        done: async () => undefined,
      };
      return { backend, teardown: async () => undefined };
    },
  },
  {
    name: 'etcd (a real single-member etcd, mutual TLS)',
    setup: async () => {
      const etcd = await EtcdProcess.start(PKI);
      const clients: ClusterStore[] = [];
      const connect = async () => {
        const store = await EtcdClusterStore.connect({ ...etcd.connection, timeoutMs: 2000 });
        clients.push(store);
        return store;
      };
      const backend: Backend = {
        fresh: async () => {
          const admin = await etcdClient(etcd.connection);
          try {
            await admin.delete().prefix(STORE_PREFIX).exec();
          } finally {
            admin.close();
          }
          return connect();
        },
        another: connect,
        setAvailable: (available) => (available ? etcd.start() : etcd.stop()),
        done: async () => {
          for (const client of clients.splice(0)) await client.close();
        },
      };
      return { backend, teardown: () => etcd.close() };
    },
  },
  {
    name: 'kubernetes (the fake API server, the real client)',
    setup: async () => {
      let fake: FakeKubernetesApi | undefined;
      let kubeconfig = '';
      const connect = () => KubernetesClusterStore.connect({ kubeconfig: { text: kubeconfig }, timeoutMs: 2000 });
      const backend: Backend = {
        fresh: async () => {
          await fake?.close();
          fake = await FakeKubernetesApi.start({ pki: PKI });
          kubeconfig = await createAdminKubeconfig({ pki: PKI, clusterName: 'contract', server: fake.url, clock });
          return connect();
        },
        another: connect,
        setAvailable: (available) => fake!.setAvailability(available ? 'up' : 'down'),
        done: async () => undefined,
      };
      return { backend, teardown: async () => fake?.close() };
    },
  },
];

for (const { name, setup } of backends) {
  describe(`cluster store contract: ${name}`, function () {
    this.timeout(30_000);
    let backend: Backend;
    let teardown: () => Promise<void>;
    let store: ClusterStore;

    before(async () => ({ backend, teardown } = await setup()));
    after(() => teardown?.());
    beforeEach(async () => (store = await backend.fresh()));
    afterEach(async () => {
      await backend.setAvailable(true);
      await backend.done();
    });

    it('refuses to read the join configuration of an empty store (StoreNotInitializedError)', async () => {
      await assert.rejects(
        store.readJoinConfig(),
        (err: unknown) =>
          err instanceof StoreNotInitializedError && /holds no join configuration/.test((err as Error).message),
      );
    });

    it('reads back exactly what was written, through another client too', async () => {
      const written = joinConfig();
      await store.writeJoinConfig(written);
      assert.deepEqual((await store.readJoinConfig()).config, written);
      assert.deepEqual((await (await backend.another()).readJoinConfig()).config, written);
    });

    it('keeps the parts a partial write does not name', async () => {
      const written = joinConfig();
      await store.writeJoinConfig(written);
      const attestation = {
        variant: 'local-vtpm',
        config: { measurements: imageMeasurements('bb', { '9': { expected: 'bb'.repeat(32), warnOnly: true } }) },
        previous: [written.attestation.config],
      };
      await store.writeJoinConfig({ attestation });
      assert.deepEqual((await store.readJoinConfig()).config, { ...written, attestation });
    });

    it('refuses to hold an empty or partial set of measurements, current or previous, and keeps what it had', async () => {
      const written = joinConfig();
      await store.writeJoinConfig(written);
      const partial = imageMeasurements('bb');
      delete partial['9'];
      for (const attestation of [
        { variant: 'local-vtpm', config: { measurements: {} } },
        { variant: 'local-vtpm', config: { measurements: partial } },
        { variant: 'local-vtpm', config: written.attestation.config, previous: [{ measurements: {} }] },
      ]) {
        await assert.rejects(
          store.writeJoinConfig({ attestation }),
          /incomplete measurements: PCR (4, 8, 9, 11, 12, 13 are|9 is) missing/,
        );
      }
      assert.deepEqual((await store.readJoinConfig()).config, written);
    });

    it('changes the revision with every write of the join configuration and keeps it without one', async () => {
      await store.writeJoinConfig(joinConfig());
      const first = (await store.readJoinConfig()).revision;
      assert.equal((await store.readJoinConfig()).revision, first, 'no write, same revision');
      const seen = [first];
      const writes: Partial<JoinConfig>[] = [
        { attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('cc') } } },
        { cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.32.0' } },
        { masterSecret: generateMasterSecret() },
        { joinServiceKey: new Uint8Array(randomBytes(32)), measurementSalt: generateMeasurementSalt() },
      ];
      for (const parts of writes) {
        await store.writeJoinConfig(parts);
        const { revision } = await store.readJoinConfig();
        assert.ok(!seen.includes(revision), `a new revision after writing ${Object.keys(parts).join(', ')}`);
        assert.equal(
          (await (await backend.another()).readJoinConfig()).revision,
          revision,
          'every client reads the same revision',
        );
        seen.push(revision);
      }
    });

    it('binds a disk to the instance that claims it first', async () => {
      const disk = randomUUID();
      assert.equal(await store.claimDisk(disk, 'worker-0'), 'worker-0');
      assert.equal(await store.claimDisk(disk, 'worker-0'), 'worker-0', 'the owner may claim it again');
      assert.equal(await store.claimDisk(disk, 'worker-1'), 'worker-0');
      assert.equal(await (await backend.another()).claimDisk(disk, 'worker-2'), 'worker-0');
      assert.equal(await store.claimDisk(randomUUID(), 'worker-1'), 'worker-1', 'another disk is another claim');
    });

    it('lets exactly one of concurrent claims of a disk win, across clients', async () => {
      const disk = randomUUID();
      const clients = [store, await backend.another(), await backend.another()];
      const instances = Array.from({ length: 12 }, (_, i) => `worker-${i}`);
      const owners = await Promise.all(
        instances.map((instance, i) => clients[i % clients.length].claimDisk(disk, instance)),
      );
      assert.equal(new Set(owners).size, 1, `every claim got the same owner: ${owners.join(', ')}`);
      assert.ok(instances.includes(owners[0]));
      assert.equal(await store.claimDisk(disk, 'late'), owners[0]);
    });

    it('puts, replaces, lists and deletes node records', async () => {
      const cp = node('control-plane-0', { role: 'control-plane', lastEntry: 'init' });
      const worker = node('worker-0');
      await store.putNode(cp);
      await store.putNode(worker);
      const rejoined = { ...worker, lastEntry: 'rejoin' as const, lastEntryAt: '2030-01-03T00:00:00.000Z' };
      await store.putNode(rejoined);
      const byName = (records: NodeRecord[]) => [...records].sort((a, b) => a.name.localeCompare(b.name));
      assert.deepEqual(byName(await (await backend.another()).listNodes()), [cp, rejoined]);
      assert.deepEqual(await (await backend.another()).getNode('worker-0'), rejoined);
      assert.equal(await store.getNode('worker-9'), undefined);
      await store.deleteNode('worker-0');
      assert.equal(await store.getNode('worker-0'), undefined);
      assert.deepEqual(await store.listNodes(), [cp]);
      await store.deleteNode('worker-0');
      assert.deepEqual(await store.listNodes(), [cp], 'deleting a missing record is no error');
    });

    it('has no Kubernetes upgrade record until one is written; writes it only where there is none yet', async () => {
      assert.equal(await store.readKubernetesUpgrade(), undefined);
      const requested = kubernetesUpgrade();
      assert.equal(await store.swapKubernetesUpgrade(requested, undefined), true);
      const read = await (await backend.another()).readKubernetesUpgrade();
      assert.deepEqual(read?.upgrade, requested);
      assert.equal(
        await store.swapKubernetesUpgrade(kubernetesUpgrade({ version: 'v1.33.6' }), undefined),
        false,
        'a record exists: a create-only swap fails',
      );
      assert.deepEqual((await store.readKubernetesUpgrade())?.upgrade, requested, 'and changes nothing');
    });

    it('swaps the Kubernetes upgrade record only at the revision it was read at; each write makes a new revision', async () => {
      await store.swapKubernetesUpgrade(kubernetesUpgrade(), undefined);
      const first = (await store.readKubernetesUpgrade())!;
      const claimed = kubernetesUpgrade({ first: 'control-plane-1' });
      assert.equal(await store.swapKubernetesUpgrade(claimed, first.revision), true);
      const second = (await store.readKubernetesUpgrade())!;
      assert.notEqual(second.revision, first.revision);
      assert.deepEqual(second.upgrade, claimed);
      assert.equal(
        await (
          await backend.another()
        ).swapKubernetesUpgrade(kubernetesUpgrade({ first: 'control-plane-2' }), first.revision),
        false,
        'a stale revision loses',
      );
      assert.deepEqual((await store.readKubernetesUpgrade())?.upgrade, claimed);
      // Join configuration writes do not disturb the record's revision check.
      await store.writeJoinConfig(joinConfig());
      const applied = {
        ...claimed,
        applied: true,
        nodes: { 'control-plane-1': { result: 'upgraded' as const, at: '2030-01-02T03:05:00.000Z' } },
      };
      assert.equal(await store.swapKubernetesUpgrade(applied, second.revision), true);
      assert.deepEqual((await store.readKubernetesUpgrade())?.upgrade, applied);
    });

    it('lets exactly one of concurrent claims of the first control plane win, across clients', async () => {
      await store.swapKubernetesUpgrade(kubernetesUpgrade(), undefined);
      const clients = [store, await backend.another(), await backend.another()];
      const names = Array.from({ length: 9 }, (_, i) => `control-plane-${i}`);
      const read = await Promise.all(names.map((_, i) => clients[i % clients.length].readKubernetesUpgrade()));
      const won = await Promise.all(
        names.map((name, i) =>
          clients[i % clients.length].swapKubernetesUpgrade({ ...read[i]!.upgrade, first: name }, read[i]!.revision),
        ),
      );
      const winners = names.filter((_, i) => won[i]);
      assert.equal(winners.length, 1, `one claim won: ${winners.join(', ')}`);
      assert.equal((await store.readKubernetesUpgrade())?.upgrade.first, winners[0]);
    });

    it('refuses every call with "the control plane has no quorum" while the backend is down, and answers again after', async () => {
      const written = joinConfig();
      await store.writeJoinConfig(written);
      await store.putNode(node('worker-0'));
      await backend.setAvailable(false);
      const unavailable = (err: unknown) =>
        err instanceof StoreUnavailableError &&
        /^The control plane has no quorum: the cluster store cannot answer \(/.test((err as Error).message);
      await assert.rejects(store.readJoinConfig(), unavailable);
      await assert.rejects(store.writeJoinConfig({ cluster: written.cluster }), unavailable);
      await assert.rejects(store.claimDisk(randomUUID(), 'worker-1'), unavailable);
      await assert.rejects(store.putNode(node('worker-1')), unavailable);
      await assert.rejects(store.listNodes(), unavailable);
      await assert.rejects(store.readKubernetesUpgrade(), unavailable);
      await assert.rejects(store.swapKubernetesUpgrade(kubernetesUpgrade(), undefined), unavailable);
      await backend.setAvailable(true);
      // The same client (a join service keeps its own) answers again once it has reconnected.
      let stillUnavailable: unknown;
      const read = await pollUntil(
        () =>
          store
            .readJoinConfig()
            .catch((err: unknown) =>
              err instanceof StoreUnavailableError ? void (stillUnavailable = err) : Promise.reject(err),
            ),
        {
          timeoutMs: 10_000,
          intervalMs: 100,
          onTimeout: () => {
            throw stillUnavailable;
          },
        },
      );
      assert.deepEqual(read.config, written, 'nothing was lost');
      assert.deepEqual(
        (await store.listNodes()).map((n) => n.name),
        ['worker-0'],
      );
    });
  });
}
