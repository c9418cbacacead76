/**
 * The Kubernetes cluster store against the fake Kubernetes API server (test/fakes/kubernetes), with the real
 * @kubernetes/client-node: where each entry lives, quorum reads, writes a reader sees whole, concurrent writers,
 * and the errors of an API server that refuses (401, 403, another cluster's certificate) or cannot answer.
 * What every backend promises is test/cluster-store/contract.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeJoinConfig, encodeNode, JOIN_CONFIG_ENTRIES } from '../../lib/cluster-store/codec.js';
import {
  DISK_PREFIX,
  JOIN_CONFIG_MAP,
  JOIN_ENTRY_PLACES,
  JOIN_SECRETS_ANNOTATION,
  JOIN_SECRETS_PREFIX,
  KubernetesClusterStore,
  NODE_PREFIX,
  STORE_LABEL,
  STORE_NAMESPACE,
} from '../../lib/cluster-store/kubernetes.js';
import { StoreUnavailableError, type JoinConfig, type NodeRecord } from '../../lib/cluster-store/types.js';
import { UserError } from '../../lib/errors.js';
import { generateMasterSecret, generateMeasurementSalt } from '../../lib/kms/index.js';
import { createAdminKubeconfig, createClusterPki, loadClusterPki, type PkiFiles } from '../../lib/pki/cluster-pki.js';
import { FakeKubernetesApi, type KubeObject } from '../fakes/kubernetes/api-server.js';
import { tokenKubeconfig, userKubeconfig } from '../fakes/kubernetes/tls.js';
import { imageMeasurements } from '../support/measurements.js';

const clock = () => new Date();
const PKI_FILES: PkiFiles = createClusterPki({ clock, clusterName: 'kube-store' });
const PKI = loadClusterPki(PKI_FILES);
const NS = STORE_NAMESPACE;

function joinConfig(): JoinConfig {
  return {
    attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('aa') } },
    cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.31.1' },
    measurementSalt: generateMeasurementSalt(),
    masterSecret: generateMasterSecret(),
    joinServiceKey: new Uint8Array(randomBytes(32)),
    pki: PKI_FILES,
  };
}

/** Every form in which a secret of `config` could leak into a message. */
function secretForms(config: JoinConfig): string[] {
  const forms = [config.masterSecret.key, config.masterSecret.salt, config.joinServiceKey].flatMap((bytes) => [
    Buffer.from(bytes).toString('hex'),
    Buffer.from(bytes).toString('base64'),
  ]);
  const caKey = config.pki['ca.key'].split('\n')[1];
  return [...forms, caKey, Buffer.from(config.pki['ca.key']).toString('base64').slice(0, 40)];
}

function assertNoSecret(text: string, config: JoinConfig): void {
  for (const form of secretForms(config)) assert.ok(!text.includes(form), 'no secret in the message');
}

describe('lib/cluster-store/kubernetes (the fake API server, the real client)', () => {
  let fake: FakeKubernetesApi;
  let admin: string;
  let store: KubernetesClusterStore;

  beforeEach(async () => {
    fake = await FakeKubernetesApi.start({ pki: PKI, tokens: { 'reader-token': { name: 'reader', groups: [] } } });
    admin = await createAdminKubeconfig({ pki: PKI, clusterName: 'kube-store', server: fake.url, clock });
    store = await KubernetesClusterStore.connect({ kubeconfig: { text: admin } });
  });
  afterEach(() => fake.close());

  const configMap = (name: string) =>
    fake.object('configmaps', NS, name) as (KubeObject & { data?: Record<string, string> }) | undefined;

  describe('layout', () => {
    it('places every entry of the join configuration at its own valid key', () => {
      assert.deepEqual([...JOIN_ENTRY_PLACES.keys()].sort(), [...JOIN_CONFIG_ENTRIES].sort());
      const places = [...JOIN_ENTRY_PLACES.values()].map((p) => `${p.in}/${p.key}`);
      assert.equal(new Set(places).size, places.length, 'no two entries share a key');
      for (const place of JOIN_ENTRY_PLACES.values()) assert.match(place.key, /^[-._a-zA-Z0-9]{1,253}$/);
      // Upstream Constellation's keys of its join-config ConfigMap.
      assert.equal(JOIN_ENTRY_PLACES.get('join/attestation-config')?.key, 'attestationConfig');
      assert.equal(JOIN_ENTRY_PLACES.get('join/measurement-salt')?.key, 'measurementSalt');
    });

    it("keeps the non-secret entries in join-config and the secret ones in an immutable Secret, each with the codec's value", async () => {
      const config = joinConfig();
      await store.writeJoinConfig(config);
      const encoded = encodeJoinConfig(config);
      const map = configMap(JOIN_CONFIG_MAP)!;
      assert.deepEqual(map.data, {
        attestationConfig: encoded.get('join/attestation-config'),
        clusterInfo: encoded.get('join/cluster'),
        measurementSalt: encoded.get('join/measurement-salt'),
      });
      assertNoSecret(JSON.stringify(map), config);

      const secretName = (map.metadata.annotations as Record<string, string>)[JOIN_SECRETS_ANNOTATION];
      assert.match(secretName, new RegExp(`^${JOIN_SECRETS_PREFIX}[0-9a-f]{10}$`));
      assert.deepEqual(fake.names('secrets', NS), [secretName]);
      const secret = fake.object('secrets', NS, secretName)! as KubeObject & { data: Record<string, string> };
      assert.equal(secret.immutable, true);
      assert.equal(secret.type, 'Opaque');
      assert.deepEqual(secret.metadata.labels, { [STORE_LABEL]: 'join-secrets' });
      const decoded = Object.fromEntries(
        Object.entries(secret.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
      );
      assert.deepEqual(decoded, {
        masterSecret: encoded.get('join/master-secret'),
        joinServiceKey: encoded.get('join/service-key'),
        'pki.ca.crt': config.pki['ca.crt'],
        'pki.ca.key': config.pki['ca.key'],
        'pki.front-proxy-ca.crt': config.pki['front-proxy-ca.crt'],
        'pki.front-proxy-ca.key': config.pki['front-proxy-ca.key'],
        'pki.etcd.ca.crt': config.pki['etcd/ca.crt'],
        'pki.etcd.ca.key': config.pki['etcd/ca.key'],
        'pki.sa.key': config.pki['sa.key'],
        'pki.sa.pub': config.pki['sa.pub'],
      });
    });

    it("keeps a node record and a disk claim in a ConfigMap each, labelled, with the codec's value", async () => {
      const record: NodeRecord = {
        name: 'worker-0',
        role: 'worker',
        diskUuid: randomUUID(),
        joinedAt: 'now',
        lastEntry: 'join',
        lastEntryAt: 'now',
      };
      await store.putNode(record);
      const uuid = randomUUID().toUpperCase();
      await store.claimDisk(uuid, 'worker-0');
      const nodeMap = configMap(`${NODE_PREFIX}worker-0`)!;
      assert.deepEqual(nodeMap.data, { record: encodeNode(record) });
      assert.deepEqual(nodeMap.metadata.labels, { [STORE_LABEL]: 'node-record' });
      const diskMap = configMap(`${DISK_PREFIX}${uuid.toLowerCase()}`)!;
      assert.deepEqual(diskMap.data, { instance: 'worker-0' });
      assert.deepEqual(diskMap.metadata.labels, { [STORE_LABEL]: 'disk-claim' });
      assert.equal(
        await store.claimDisk(uuid.toLowerCase(), 'worker-1'),
        'worker-0',
        'a UUID names one disk in either case',
      );
    });

    it('refuses a node name or disk UUID that cannot name an object, before any request', async () => {
      fake.requests.length = 0;
      await assert.rejects(
        store.claimDisk('../x', 'worker-0'),
        (err: unknown) =>
          err instanceof UserError &&
          /The disk UUID "\.\.\/x" does not fit a Kubernetes object name/.test((err as Error).message),
      );
      await assert.rejects(store.deleteNode('x'.repeat(240)), /does not fit a Kubernetes object name/);
      assert.deepEqual(fake.requests, []);
    });
  });

  describe('consistency', () => {
    it('reads with plain GETs and LISTs, which the API server answers from etcd (no resourceVersion, no watch)', async () => {
      await store.writeJoinConfig(joinConfig());
      await store.putNode({
        name: 'worker-0',
        role: 'worker',
        diskUuid: randomUUID(),
        joinedAt: 'now',
        lastEntry: 'join',
        lastEntryAt: 'now',
      });
      fake.requests.length = 0;
      await store.readJoinConfig();
      await store.listNodes();
      assert.deepEqual(
        fake.requests.map((r) => `${r.method} ${r.path}`),
        [
          `GET /api/v1/namespaces/${NS}/configmaps/${JOIN_CONFIG_MAP}`,
          `GET /api/v1/namespaces/${NS}/secrets/${fake.names('secrets', NS)[0]}`,
          `GET /api/v1/namespaces/${NS}/configmaps`,
        ],
      );
      for (const request of fake.requests) {
        assert.ok(
          !request.query.has('resourceVersion') && !request.query.has('watch'),
          `${request.method} ${request.path}?${request.query}`,
        );
      }
    });

    it('writes an attestation config (an upgrade) to join-config alone, and a new secret entry to a new Secret that replaces the old', async () => {
      await store.writeJoinConfig(joinConfig());
      const [first] = fake.names('secrets', NS);
      fake.requests.length = 0;
      await store.writeJoinConfig({
        attestation: { variant: 'local-vtpm', config: { measurements: imageMeasurements('dd') } },
      });
      assert.deepEqual(
        fake.requests.filter((r) => r.path.includes('/secrets')),
        [],
        'no Secret is read or written',
      );
      assert.deepEqual(fake.names('secrets', NS), [first]);

      const masterSecret = generateMasterSecret();
      await store.writeJoinConfig({ masterSecret });
      const [second] = fake.names('secrets', NS);
      assert.notEqual(second, first, 'the old Secret is gone, a new one holds the entries');
      assert.deepEqual((await store.readJoinConfig()).config.masterSecret, masterSecret);
    });

    it('lets readers see the old or the new join configuration, never half of each, while secret entries change', async () => {
      const base = { ...joinConfig(), cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.30.0' } };
      await store.writeJoinConfig(base);
      // Each write changes a ConfigMap entry and a Secret entry together: version N goes with init secret N.
      const serviceKeyOf = (n: number) => new Uint8Array(Buffer.alloc(32, n));
      let writing = true;
      const writer = (async () => {
        for (let n = 1; n <= 8; n++) {
          await store.writeJoinConfig({
            cluster: { ...base.cluster, kubernetesVersion: `v1.31.${n}` },
            joinServiceKey: serviceKeyOf(n),
          });
        }
        writing = false;
      })();
      const readers = [store, await KubernetesClusterStore.connect({ kubeconfig: { text: admin } })].map(
        async (reader) => {
          let reads = 0;
          while (writing) {
            const { config } = await reader.readJoinConfig();
            const version = config.cluster.kubernetesVersion;
            const expected = version === 'v1.30.0' ? base.joinServiceKey : serviceKeyOf(Number(version.split('.')[2]));
            assert.deepEqual(config.joinServiceKey, expected, `version ${version} with its own join-service key`);
            reads++;
          }
          return reads;
        },
      );
      await writer;
      const reads = await Promise.all(readers);
      assert.ok(
        reads.every((r) => r > 0),
        `both readers read during the writes (${reads.join(', ')})`,
      );
      assert.equal(fake.names('secrets', NS).length, 1, 'replaced Secrets are deleted');
    });

    it('merges concurrent writers: each write survives, the later one retried after a conflict (409)', async () => {
      const config = joinConfig();
      await store.writeJoinConfig(config);
      const other = await KubernetesClusterStore.connect({ kubeconfig: { text: admin } });
      const attestation = { variant: 'local-vtpm', config: { measurements: imageMeasurements('bb') } };
      const cluster = { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion: 'v1.32.0' };
      await Promise.all([store.writeJoinConfig({ attestation }), other.writeJoinConfig({ cluster })]);
      assert.deepEqual((await store.readJoinConfig()).config, { ...config, attestation, cluster });
      assert.ok(
        fake.requests.some((r) => r.method === 'PUT' && r.status === 409),
        'one writer met a conflict',
      );
    });

    it('names a join-config whose Secret is gone', async () => {
      await store.writeJoinConfig(joinConfig());
      const [secret] = fake.names('secrets', NS);
      fake.remove('secrets', NS, secret);
      await assert.rejects(
        store.readJoinConfig(),
        (err: unknown) =>
          err instanceof UserError &&
          err.message.includes(`ConfigMap ${NS}/${JOIN_CONFIG_MAP} names the Secret ${secret}, which does not exist`),
      );
    });
  });

  describe('errors', () => {
    const unavailable = (pattern: RegExp) => (err: unknown) =>
      err instanceof StoreUnavailableError &&
      /^The control plane has no quorum: /.test((err as Error).message) &&
      pattern.test((err as Error).message);

    it('an API server that refuses connections: no quorum', async () => {
      await fake.setAvailability('down');
      await assert.rejects(
        store.readJoinConfig(),
        unavailable(/could not be reached to read ConfigMap kube-system\/join-config \(ECONNREFUSED\)/),
      );
    });

    it('an API server that never answers: no quorum after the request deadline', async () => {
      await fake.setAvailability('hanging');
      const quick = await KubernetesClusterStore.connect({ kubeconfig: { text: admin }, timeoutMs: 300 });
      await assert.rejects(
        quick.claimDisk(randomUUID(), 'worker-0'),
        unavailable(/did not answer the request to create ConfigMap .* within 0\.3 s/),
      );
    });

    it('an API server whose etcd has no quorum (500): no quorum, with its reason', async () => {
      await fake.setAvailability('etcd-no-quorum');
      await assert.rejects(
        store.listNodes(),
        unavailable(/answered the request to list .* with 500: etcdserver: request timed out/),
      );
    });

    it('credentials the API server does not accept (401): a UserError pointing to the admin kubeconfig, not "no quorum"', async () => {
      const stranger = await KubernetesClusterStore.connect({
        kubeconfig: { text: tokenKubeconfig(PKI, fake.url, 'no-such-token') },
      });
      await assert.rejects(stranger.readJoinConfig(), (err: unknown) => {
        assert.ok(err instanceof UserError && !(err instanceof StoreUnavailableError));
        assert.match(
          err.message,
          /does not accept the credentials of the kubeconfig \(401 Unauthorized\) to read ConfigMap kube-system\/join-config/,
        );
        assert.match(err.hint ?? '', /constellation-admin\.conf/);
        return true;
      });
    });

    it('a user without access (403): a UserError naming the user and what was refused', async () => {
      const jane = await KubernetesClusterStore.connect({
        kubeconfig: { text: userKubeconfig(PKI, fake.url, { name: 'jane', groups: ['developers'] }) },
      });
      await assert.rejects(jane.readJoinConfig(), (err: unknown) => {
        assert.ok(err instanceof UserError && !(err instanceof StoreUnavailableError));
        assert.match(
          err.message,
          /does not allow the user of the kubeconfig to read ConfigMap kube-system\/join-config \(403 Forbidden: configmaps "join-config" is forbidden: User "jane" cannot get resource "configmaps"/,
        );
        assert.match(err.hint ?? '', /system:masters/);
        return true;
      });
    });

    it('a write refused half-way leaves join-config as it was and no secret in the error', async () => {
      const writerFake = await FakeKubernetesApi.start({
        pki: PKI,
        authorize: (_user, _verb, resource) => resource === 'configmaps',
      });
      try {
        const limited = await KubernetesClusterStore.connect({
          kubeconfig: { text: userKubeconfig(PKI, writerFake.url, { name: 'cm-writer', groups: [] }) },
        });
        const config = joinConfig();
        await assert.rejects(limited.writeJoinConfig(config), (err: unknown) => {
          assert.ok(err instanceof UserError);
          assert.match(err.message, /to create Secret kube-system\/join-secrets-[0-9a-f]+ \(403 Forbidden/);
          assertNoSecret(`${err.message} ${err.hint} ${String((err as Error).cause)} ${JSON.stringify(err)}`, config);
          return true;
        });
        assert.deepEqual(writerFake.names('configmaps', NS), [], 'join-config was not written');
      } finally {
        await writerFake.close();
      }
    });

    it('an API server with another cluster\'s certificate: a UserError, not "no quorum"', async () => {
      const other = loadClusterPki(createClusterPki({ clock, clusterName: 'other' }));
      const foreign = await KubernetesClusterStore.connect({
        kubeconfig: {
          text: await createAdminKubeconfig({ pki: other, clusterName: 'other', server: fake.url, clock }),
        },
      });
      await assert.rejects(
        foreign.readJoinConfig(),
        (err: unknown) =>
          err instanceof UserError &&
          !(err instanceof StoreUnavailableError) &&
          /does not present a certificate that the kubeconfig trusts/.test((err as Error).message),
      );
    });

    describe('kubeconfigs', () => {
      let dir: string;
      beforeEach(async () => (dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kube-store-'))));
      afterEach(() => fs.rm(dir, { recursive: true, force: true }));

      it('reads a kubeconfig file', async () => {
        const file = path.join(dir, 'admin.conf');
        await fs.writeFile(file, admin, { mode: 0o600 });
        const fromFile = await KubernetesClusterStore.connect({ kubeconfig: { path: file } });
        await store.writeJoinConfig(joinConfig());
        assert.equal((await fromFile.readJoinConfig()).revision, (await store.readJoinConfig()).revision);
      });

      const cases: [string, () => Promise<KubernetesClusterStore>, RegExp][] = [
        [
          'a missing file',
          () => KubernetesClusterStore.connect({ kubeconfig: { path: path.join(dir, 'none.conf') } }),
          /^There is no kubeconfig at .*none\.conf\.$/,
        ],
        [
          'text that is not YAML, without quoting it',
          () => KubernetesClusterStore.connect({ kubeconfig: { text: 'client-key-data: [SECRETKEY' } }),
          /^The kubeconfig is not a kubeconfig \(YAML with clusters, users and contexts\)\.$/,
        ],
        [
          'a kubeconfig without a current context',
          () => KubernetesClusterStore.connect({ kubeconfig: { text: 'apiVersion: v1\nkind: Config\n' } }),
          /^The kubeconfig names no cluster and user to use/,
        ],
      ];
      for (const [what, connect, message] of cases) {
        it(`refuses ${what}`, async () => {
          await assert.rejects(
            connect(),
            (err: unknown) =>
              err instanceof UserError &&
              message.test((err as Error).message) &&
              !(err as Error).message.includes('SECRETKEY'),
          );
        });
      }
    });
  });
});
