/**
 * The cluster store of kubeadm nodes: KubernetesStoreHost, and init and the join service with it, the kubeadm
 * backend (stand-in kubeadm and kubectl on PATH) and the fake Kubernetes API server (test/fakes/kubernetes) as the
 * API server that kubeadm init brings up with the cluster's PKI. Init writes the join configuration into the
 * Kubernetes API; the join service reads it there for every join, so a measurement written once through the
 * admin kubeconfig applies to the next join, and an API server that cannot answer refuses joins.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import { EtcdMember } from '../../../bootstrapper/etcd-member.js';
import { InitServer } from '../../../bootstrapper/init-server.js';
import { KubernetesStoreHost } from '../../../bootstrapper/kubernetes-store-host.js';
import {
  createBackend,
  spawnExec,
  type Exec,
  type KubernetesBackend,
} from '../../../bootstrapper/kubernetes/backend.js';
import { createStoreHost } from '../../../bootstrapper/main.js';
import { NodeLock } from '../../../bootstrapper/node-lock.js';
import { NodeSetup } from '../../../bootstrapper/node-setup.js';
import { NodeStatusTracker } from '../../../bootstrapper/node-status.js';
import type { ClusterStoreHost } from '../../../bootstrapper/store-host.js';
import {
  DISK_PREFIX,
  JOIN_CONFIG_MAP,
  KubernetesClusterStore,
  NODE_PREFIX,
  STORE_NAMESPACE,
} from '../../../lib/cluster-store/kubernetes.js';
import { createLogger, nullLogger } from '../../../lib/logging/index.js';
import {
  createAdminKubeconfig,
  createClusterPki,
  loadClusterPki,
  PKI_FILE_NAMES,
} from '../../../lib/pki/cluster-pki.js';
import { TPM_ALG } from '../../../lib/tpm/constants.js';
import { InitSecrets } from '../../../proto/gen/constellation/init.js';
import { FakeKubernetesApi } from '../../fakes/kubernetes/api-server.js';
import { diskUuidOf, hello, kubeletCsr, requestTicket } from '../../joinservice/support/join-client.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from '../../joinservice/support/software-vtpm.js';
import { PlainStateDisk } from '../../support/plain-state-disk.js';
import { ADMIN_CONF_CONTENT, installStandinKubeadm, type Standin } from './standin-kubeadm.js';
import { pollUntil } from '../../../lib/poll.js';

const INIT_SECRET = 'b'.repeat(64);
const clock = () => new Date();

describe('bootstrapper/kubernetes-store-host: the cluster store of kubeadm nodes', function () {
  this.timeout(60_000);
  let dir: string;
  let standin: Standin;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kube-store-host-'));
    standin = await installStandinKubeadm(dir);
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it("has nothing to create, join or resume, hosts the store once kubeadm wrote the admin kubeconfig, and gives the CLI the backend's name", async () => {
    const host: ClusterStoreHost = new KubernetesStoreHost({ adminConfPath: standin.adminConf });
    const pki = loadClusterPki(createClusterPki({ clock, clusterName: 'demo' }));
    assert.equal(await host.hosted(), false);
    await assert.rejects(
      host.open(),
      new RegExp(
        `This node has no admin kubeconfig at ${standin.adminConf}, so its join service cannot read the cluster store`,
      ),
    );
    await host.create(pki);
    await host.join(pki, []);
    await host.resume();
    assert.equal(await host.hosted(), false, 'none of them wrote anything');
    assert.deepEqual(await host.adminCredentials(pki), { backend: 'kubernetes' });

    await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
    await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
    assert.equal(await host.hosted(), true);
    // The stand-in's placeholder names no cluster: the store says which file is wrong.
    await assert.rejects(host.open(), new RegExp(`${standin.adminConf} names no cluster and user to use`, 'i'));
    await host.close();
  });

  it('is what the node program uses on kubeadm nodes (an etcd member on none nodes)', () => {
    const etcd = { name: 'cp-0', ip: '127.0.0.1', dir, logFile: path.join(dir, 'etcd.log'), clock, logger: nullLogger };
    assert.ok(createStoreHost('kubeadm', { etcd, kubernetes: {} }) instanceof KubernetesStoreHost);
    assert.ok(createStoreHost('none', { etcd, kubernetes: {} }) instanceof EtcdMember);
  });

  describe('init and the join service', () => {
    let fake: FakeKubernetesApi;
    let setup: NodeSetup;
    let disk: PlainStateDisk;
    let lock: NodeLock;
    let backend: KubernetesBackend;
    const registry = new TestAkRegistry();

    beforeEach(async () => {
      // The API server runs with a placeholder PKI until kubeadm init brings it up with the cluster's.
      fake = await FakeKubernetesApi.start({
        pki: loadClusterPki(createClusterPki({ clock, clusterName: 'placeholder' })),
      });
      // What real kubeadm init does beyond the stand-in: the API server comes up with certificates of the cluster CA,
      // and admin.conf is a kubeconfig of that CA for the control-plane endpoint.
      const exec: Exec = async (command, args, options) => {
        const result = await spawnExec(command, args, options);
        if (command === 'kubeadm' && args[0] === 'init' && args[1] !== 'phase' && result.exitCode === 0) {
          const files = Object.fromEntries(
            await Promise.all(
              PKI_FILE_NAMES.map(async (name) => [name, await fs.readFile(path.join(standin.pkiDir, name), 'utf8')]),
            ),
          );
          const pki = loadClusterPki(files);
          fake.useClusterPki(pki);
          await fs.writeFile(
            standin.adminConf,
            await createAdminKubeconfig({ pki, clusterName: 'demo', server: fake.url, clock }),
            { mode: 0o600 },
          );
        }
        return result;
      };
      backend = createBackend('kubeadm', {
        workDir: path.join(dir, 'work'),
        pkiDir: standin.pkiDir,
        adminConfPath: standin.adminConf,
        manifestsDir: standin.manifestsDir,
        env: standin.env,
        hasWireGuard: async () => true,
        exec,
      });
      await fs.mkdir(path.join(dir, 'work'), { recursive: true });
      disk = new PlainStateDisk(path.join(dir, 'state'));
      lock = new NodeLock();
      setup = new NodeSetup({
        tpm: {
          pcrBanks: async () => [{ hashAlg: TPM_ALG.SHA256, pcrs: [...Array(24).keys()] }],
          pcrExtend: async () => undefined,
        },
        stateDisk: disk,
        logger: nullLogger,
        clock,
        joinService: {
          validatorDeps: { akRegistry: registry },
          host: '127.0.0.1',
          port: 0,
          tokenSink: backend.tokenSink(nullLogger),
        },
        store: new KubernetesStoreHost({ adminConfPath: standin.adminConf }),
        lock,
      });
    });
    afterEach(async () => {
      await setup.close();
      await disk.close();
      await fake.close();
    });

    async function initialize() {
      const init = new InitServer({
        node: { name: 'control-plane-0', ip: '127.0.0.1', role: 'control-plane' },
        issuer: new SoftwareVtpm('control-plane-0'),
        metadata: {
          self: async () => ({
            name: 'control-plane-0',
            providerId: 'test://control-plane-0',
            role: 'control-plane',
            vpcIp: '127.0.0.1',
          }),
          peers: async () => [],
          // The control-plane endpoint: where the API server answers.
          loadBalancerEndpoint: async () => `127.0.0.1:${fake.port}`,
          initSecretHash: async () => bcrypt.hashSync(INIT_SECRET, 4),
          joinServiceKey: async () => '',
        },
        lock,
        status: new NodeStatusTracker('control-plane-0', 'control-plane', { lock }),
        setup,
        stateDisk: disk,
        backend,
        logger: createLogger(() => undefined),
        clock,
        logTail: () => new Uint8Array(0),
      });
      return init.initialize(
        InitSecrets.fromPartial({
          masterKey: Buffer.alloc(32, 1),
          masterSalt: Buffer.alloc(32, 2),
          initSecret: Buffer.from(INIT_SECRET),
          measurementSalt: Buffer.alloc(32, 3),
          kubernetesVersion: 'v1.31.1',
          clusterName: 'demo',
          attestationConfig: Buffer.from(
            JSON.stringify({ variant: 'local-vtpm', config: { measurements: measurementsFor(imagePcrs()) } }),
          ),
        }),
      );
    }

    function worker(name: string, image?: string): SoftwareVtpm {
      const vtpm = new SoftwareVtpm(name, image ? imagePcrs(image) : undefined);
      registry.register(name, vtpm.akPublic, 'worker');
      return vtpm;
    }

    async function join(address: string, name: string, image?: string) {
      return requestTicket(
        address,
        worker(name, image),
        hello({ nodeName: name, certificateRequest: await kubeletCsr() }),
        'join',
      );
    }

    it("init writes the join configuration, the node record and the disk claim into the Kubernetes API, and hands the CLI the backend's name", async () => {
      const result = await initialize();
      assert.deepEqual(JSON.parse(Buffer.from(result.storeCredentials).toString()), { backend: 'kubernetes' });
      assert.equal(
        Buffer.from(result.kubeconfig).toString(),
        await fs.readFile(standin.adminConf, 'utf8'),
        'the CLI gets admin.conf',
      );

      const cli = await KubernetesClusterStore.connect({
        kubeconfig: { text: Buffer.from(result.kubeconfig).toString() },
      });
      const { config } = await cli.readJoinConfig();
      assert.deepEqual(config.cluster, { apiServerEndpoint: `127.0.0.1:${fake.port}`, kubernetesVersion: 'v1.31.1' });
      assert.deepEqual(config.masterSecret, {
        key: new Uint8Array(Buffer.alloc(32, 1)),
        salt: new Uint8Array(Buffer.alloc(32, 2)),
      });
      assert.equal(
        config.pki['ca.crt'],
        await fs.readFile(path.join(standin.pkiDir, 'ca.crt'), 'utf8'),
        'the PKI kubeadm runs with',
      );
      assert.deepEqual(
        (await cli.listNodes()).map((n) => [n.name, n.role, n.lastEntry, n.diskUuid]),
        [['control-plane-0', 'control-plane', 'init', disk.uuid]],
      );
      assert.ok(fake.object('configmaps', STORE_NAMESPACE, JOIN_CONFIG_MAP));
      assert.deepEqual(fake.object('configmaps', STORE_NAMESPACE, `${DISK_PREFIX}${disk.uuid}`)?.data, {
        instance: 'control-plane-0',
      });
    });

    it('the join service reads the store in the API for every join: a measurement written once applies to the next join, and no API server means no join', async () => {
      await initialize();
      const address = `127.0.0.1:${(await setup.runningJoinService()!).port}`;

      const first = await join(address, 'worker-0');
      assert.equal(first.error, undefined, first.error?.message);
      // kubeadm's bootstrap-token Secret, applied with kubectl from a file (the token never on a command line).
      const tokenApplies = (await standin.calls()).filter(
        (c) => c.program === 'kubectl' && c.args.at(-1)!.includes('bootstrap-token-'),
      );
      assert.equal(tokenApplies.length, 1, 'the token was registered with the API server');
      assert.deepEqual(tokenApplies[0]!.args.slice(0, 5), [
        'apply',
        '--server-side',
        '--force-conflicts',
        '--kubeconfig',
        standin.adminConf,
      ]);
      assert.deepEqual(fake.object('configmaps', STORE_NAMESPACE, `${DISK_PREFIX}${diskUuidOf('worker-0')}`)?.data, {
        instance: 'worker-0',
      });
      // The node's record is written once its ticket is on its way (it decides nothing): it follows shortly.
      await pollUntil(() => fake.object('configmaps', STORE_NAMESPACE, `${NODE_PREFIX}worker-0`), {
        timeoutMs: 2_000,
        intervalMs: 20,
        what: "the worker's record",
      });

      // An upgrade writes new measurements once, with the admin kubeconfig: the running join service applies them.
      const cli = await KubernetesClusterStore.connect({ kubeconfig: { path: standin.adminConf } });
      await cli.writeJoinConfig({
        attestation: { variant: 'local-vtpm', config: { measurements: measurementsFor(imagePcrs('node image v2')) } },
      });
      const old = await join(address, 'worker-1');
      assert.equal(old.ticket, undefined);
      assert.deepEqual(old.responses, ['challenge', 'failure']);
      assert.match(old.error!.message, /PCR 4: expected/);
      const upgraded = await join(address, 'worker-2', 'node image v2');
      assert.equal(upgraded.error, undefined, upgraded.error?.message);

      await fake.setAvailability('down');
      const refused = await join(address, 'worker-3', 'node image v2');
      assert.equal(refused.ticket, undefined);
      assert.deepEqual(refused.responses, ['challenge', 'failure']);
      assert.match(
        refused.error!.message,
        /The control plane has no quorum: the cluster store cannot answer \(the Kubernetes API server at https:\/\/127\.0\.0\.1:\d+ could not be reached/,
      );
    });
  });
});
