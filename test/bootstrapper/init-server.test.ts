import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import type { InitParams, KubernetesBackend } from '../../bootstrapper/kubernetes/backend.js';
import { checkInitSecrets, InitServer } from '../../bootstrapper/init-server.js';
import { NodeLock } from '../../bootstrapper/node-lock.js';
import { NodeSetup } from '../../bootstrapper/node-setup.js';
import { NodeStatusTracker } from '../../bootstrapper/node-status.js';
import { MemoryStoreHost } from '../support/memory-store-host.js';
import { deriveSshCa, sshCaPublicKeyLine } from '../../lib/ssh/certificate.js';
import { NODE_SSH_CA_FILE } from '../../lib/ssh/sshd-config.js';
import { PlainStateDisk } from '../support/plain-state-disk.js';
import type { Issuer } from '../../lib/attestation/types.js';
import { IMAGE_PCRS } from '../../lib/attestation/measurements.js';
import { nullLogger } from '../../lib/logging/index.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import type { TpmDigest } from '../../lib/tpm/client.js';
import { InitSecrets } from '../../proto/gen/constellation/init.js';
import { MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import { unused } from '../support/unused.js';
import type { InstanceMetadata } from '../../providers/contract.js';

const INIT_SECRET = 'a'.repeat(64);
/** Every image PCR (a validator refuses less), zero: these tests attest no node. */
const ZERO_IMAGE_MEASUREMENTS = Object.fromEntries(
  IMAGE_PCRS.map((i) => [String(i), { expected: '00'.repeat(32), warnOnly: false }]),
);

/** A backend that fails its first `failures` inits, counting calls. */
class CountingBackend implements KubernetesBackend {
  readonly name = 'none' as const;
  inits = 0;
  constructor(private failures = 0) {}
  async init(p: InitParams) {
    this.inits++;
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (this.failures-- > 0) throw new Error('kubeadm exploded');
    return { kubeconfig: p.adminKubeconfig, message: 'ok' };
  }
  async join() {
    return { message: 'ok' };
  }
  tokenSink() {
    return new MemoryTokenSink();
  }
  async upgradeControlPlane(): Promise<never> {
    throw new Error('init never upgrades');
  }
}

describe('bootstrapper/init-server', () => {
  let dir: string;
  let disk: PlainStateDisk;
  let storeHost: MemoryStoreHost;
  let extended: TpmDigest[][];
  let setup: NodeSetup;
  let lock: NodeLock;

  async function server(backend: KubernetesBackend, peers: () => Promise<InstanceMetadata[]> = async () => []) {
    const status = new NodeStatusTracker('cp-0', 'control-plane', { lock });
    const init = new InitServer({
      node: { name: 'cp-0', ip: '127.0.0.1', role: 'control-plane' },
      issuer: unused<Issuer>('issuer'), // the attested exchange is not part of these tests: initialize() is called directly
      metadata: {
        self: async () => ({ name: 'cp-0', providerId: 'test://cp-0', role: 'control-plane', vpcIp: '127.0.0.1' }),
        peers,
        loadBalancerEndpoint: async () => '127.0.0.1',
        initSecretHash: async () => bcrypt.hashSync(INIT_SECRET, 4),
        joinServiceKey: async () => '',
      },
      lock,
      status,
      setup,
      stateDisk: disk,
      backend,
      logger: nullLogger,
      clock: () => new Date(),
      logTail: () => new Uint8Array(0),
    });
    return { init, status, lock };
  }

  function secrets(overrides: Partial<InitSecrets> = {}): InitSecrets {
    return InitSecrets.fromPartial({
      masterKey: Buffer.alloc(32, 1),
      masterSalt: Buffer.alloc(32, 2),
      initSecret: Buffer.from(INIT_SECRET),
      measurementSalt: Buffer.alloc(32, 3),
      kubernetesVersion: 'v1.31.1',
      attestationConfig: Buffer.from(
        JSON.stringify({ variant: 'local-vtpm', config: { measurements: ZERO_IMAGE_MEASUREMENTS } }),
      ),
      ...overrides,
    });
  }

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'init-server-'));
    disk = new PlainStateDisk(path.join(dir, 'state'));
    storeHost = new MemoryStoreHost();
    extended = [];
    lock = new NodeLock();
    setup = new NodeSetup({
      tpm: {
        pcrBanks: async () => [{ hashAlg: TPM_ALG.SHA256, pcrs: [...Array(24).keys()] }],
        pcrExtend: async (_index: number, digests: TpmDigest[]) => void extended.push(digests),
      },
      stateDisk: disk,
      logger: nullLogger,
      clock: () => new Date(),
      joinService: { validatorDeps: {}, host: '127.0.0.1', port: 0 },
      store: storeHost,
      lock,
    });
  });
  afterEach(async () => {
    await setup.close();
    await disk.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const instance = (name: string, role: 'control-plane' | 'worker'): InstanceMetadata => ({
    name,
    providerId: `test://${name}`,
    role,
    vpcIp: '127.0.0.1',
  });
  for (const [what, peers, alone] of [
    ['lists itself and workers', async () => [instance('cp-0', 'control-plane'), instance('w-0', 'worker')], true],
    [
      'lists another control plane',
      async () => [instance('cp-0', 'control-plane'), instance('cp-1', 'control-plane')],
      false,
    ],
    ['cannot be read', async () => Promise.reject(new Error('metadata down')), false],
  ] as [string, () => Promise<InstanceMetadata[]>, boolean][]) {
    it(`creates the cluster store ${alone ? 'as a member alone (short etcd timeouts)' : 'for peers'} when the metadata ${what}`, async () => {
      const { init } = await server(new CountingBackend(), peers);
      await init.initialize(secrets());
      assert.deepEqual(storeHost.createdAlone, [alone]);
    });
  }

  it('runs once for concurrent inits with the same secrets, and both get the same result', async () => {
    const backend = new CountingBackend();
    const { init, status } = await server(backend);
    const [a, b] = await Promise.all([init.initialize(secrets()), init.initialize(secrets())]);
    assert.equal(backend.inits, 1);
    assert.deepEqual(a, b);
    assert.equal(extended.length, 1, 'PCR 15 is extended once');
    assert.equal(status.get().state, 'initialized');
    // The cluster store got the join configuration, the node's record and its disk claim; the CLI its credentials.
    const { config } = await storeHost.store.readJoinConfig();
    assert.equal(config.cluster.kubernetesVersion, 'v1.31.1');
    assert.deepEqual(config.masterSecret, {
      key: new Uint8Array(Buffer.alloc(32, 1)),
      salt: new Uint8Array(Buffer.alloc(32, 2)),
    });
    assert.deepEqual(
      (await storeHost.store.listNodes()).map((n) => [n.name, n.role, n.lastEntry, n.diskUuid]),
      [['cp-0', 'control-plane', 'init', disk.uuid]],
    );
    assert.equal(await storeHost.store.claimDisk(disk.uuid, 'someone-else'), 'cp-0', 'the disk is bound to the node');
    assert.equal(storeHost.created, 1);
    assert.equal(JSON.parse(Buffer.from(a.storeCredentials).toString()).backend, 'etcd');
  });

  it("writes the emergency SSH CA of the master secret to the state disk, for the node's SSH server", async () => {
    const { init } = await server(new CountingBackend());
    await init.initialize(secrets());
    const line = Buffer.from((await disk.readFile(NODE_SSH_CA_FILE))!).toString();
    assert.equal(
      line,
      sshCaPublicKeyLine(deriveSshCa({ key: Buffer.alloc(32, 1), salt: Buffer.alloc(32, 2) }).publicKey),
    );
  });

  it('runs the steps again when a retried init follows a failed one, without formatting the disk twice', async () => {
    const backend = new CountingBackend(1);
    const { init, status } = await server(backend);
    await assert.rejects(init.initialize(secrets()), /kubeadm exploded/);
    assert.equal(status.get().state, 'failed');
    assert.match(status.get().reason, /internal error: kubeadm exploded/);
    await assert.rejects(
      init.initialize(secrets({ masterKey: Buffer.alloc(32, 9) })),
      /already initialized .* with another master secret/,
    );
    const result = await init.initialize(secrets());
    assert.equal(backend.inits, 2);
    assert.equal(result.clusterId.length, 32);
    assert.equal(status.get().state, 'initialized');
    assert.equal(extended.length, 1);
    assert.equal(disk.formats, 1, 'the disk was formatted once');
  });

  it('refuses a node that is joining, and one whose disk is already formatted', async () => {
    const join = lock.tryLock('join')!;
    await assert.rejects(
      (await server(new CountingBackend())).init.initialize(secrets()),
      /has joined \(or is joining\) a cluster/,
    );
    lock.release(join);

    await disk.format(randomBytes(32));
    const fresh = await server(new CountingBackend());
    await assert.rejects(fresh.init.initialize(secrets()), /state disk is already formatted/);
    assert.equal(fresh.lock.locked, false);
  });

  describe('checkInitSecrets', () => {
    it('accepts the join service file format and a flat {variant, measurements}', () => {
      const measurements = { '4': { expected: '00'.repeat(32), warnOnly: false } };
      const nested = checkInitSecrets(
        secrets({
          attestationConfig: Buffer.from(JSON.stringify({ variant: 'local-vtpm', config: { measurements } })),
        }),
      );
      const flat = checkInitSecrets(
        secrets({ attestationConfig: Buffer.from(JSON.stringify({ variant: 'local-vtpm', measurements })) }),
      );
      assert.deepEqual(nested.attestation, { variant: 'local-vtpm', config: { measurements } });
      assert.deepEqual(flat.attestation, nested.attestation);
      assert.equal(flat.clusterName, 'constellation');
      assert.equal(flat.serviceCidr, '10.96.0.0/12');
    });

    it('names what is malformed, never quoting a secret', () => {
      const cases: Array<[Partial<InitSecrets>, RegExp]> = [
        [{ masterKey: Buffer.alloc(8, 0x41) }, /master key has 8 bytes/],
        [{ masterSalt: Buffer.alloc(4) }, /master salt has 4 bytes/],
        [{ measurementSalt: Buffer.alloc(31) }, /measurement salt has 31 bytes/],
        [{ initSecret: Buffer.alloc(0) }, /no init secret/],
        [{ kubernetesVersion: '' }, /no Kubernetes version/],
        [{ attestationConfig: Buffer.from('{') }, /not JSON/],
        [{ attestationConfig: Buffer.from('{"config":{}}') }, /no variant/],
        [{ attestationConfig: Buffer.from('{"variant":"local-vtpm"}') }, /no measurements/],
      ];
      for (const [overrides, message] of cases) {
        assert.throws(
          () => checkInitSecrets(secrets(overrides)),
          (err: Error) => message.test(err.message) && !err.message.includes('AAAAAAAA'),
        );
      }
    });
  });
});
