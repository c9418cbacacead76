import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createBackend,
  KubernetesBackendError,
  NOT_RUN_NOTICE,
  type InitParams,
  type JoinParams,
} from '../../../bootstrapper/kubernetes/backend.js';
import { MemoryTokenSink, type BootstrapToken } from '../../../joinservice/bootstrap-token.js';
import { createLogger, type Logger } from '../../../lib/logging/index.js';
import { ADMIN_CONF_CONTENT, installStandinKubeadm, PRINTED_CERTIFICATE_KEY, PRINTED_INIT_TOKEN, type Standin } from './standin-kubeadm.js';

const CA_FILES = ['ca.crt', 'ca.key', 'front-proxy-ca.crt', 'front-proxy-ca.key', 'etcd/ca.crt', 'etcd/ca.key', 'sa.key', 'sa.pub'];
const pkiFiles = () => Object.fromEntries(CA_FILES.map((name) => [name, Buffer.from(`contents of ${name}\n`)]));
const hex = (n: number) => randomBytes(n).toString('hex');
const newToken = () => `${hex(3)}.${hex(8)}`;
const bootstrapToken = (): BootstrapToken => {
  const token = newToken();
  return { token, id: token.split('.')[0]!, expiresAt: new Date(Date.now() + 15 * 60_000) };
};

function collectingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger((line) => lines.push(line)), lines };
}

function initParams(log: Logger): InitParams {
  return {
    nodeName: 'control-plane-0',
    nodeIp: '10.9.0.10',
    clusterName: 'demo',
    kubernetesVersion: '1.31.2',
    apiServerEndpoint: '34.1.2.3:6443',
    certSANs: ['34.1.2.3', 'demo.example.com', '34.1.2.3'],
    serviceCIDR: '10.96.0.0/12',
    podCIDR: '10.244.0.0/16',
    pkiFiles: pkiFiles(),
    adminKubeconfig: Buffer.from('kubeconfig made by lib/pki'),
    log,
  };
}

function joinParams(log: Logger, over: Partial<JoinParams> = {}): JoinParams {
  return {
    nodeName: 'worker-0',
    nodeIp: '10.9.0.20',
    apiServerEndpoint: '34.1.2.3:6443',
    token: newToken(),
    discoveryTokenCaCertHash: `sha256:${hex(32)}`,
    isControlPlane: false,
    controlPlaneFiles: {},
    kubernetesVersion: 'v1.31.2',
    log,
    ...over,
  };
}

describe('bootstrapper/kubernetes', () => {
  let dir: string;
  let workDir: string;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'k8s-backend-'));
    workDir = path.join(dir, 'work');
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it('refuses an unknown backend name', () => {
    assert.throws(() => createBackend('k3s', { workDir }), (err: unknown) => err instanceof KubernetesBackendError && /none, kubeadm/.test(err.hint ?? ''));
  });

  describe('none', () => {
    it('init says plainly that Kubernetes is not run and returns the given admin kubeconfig', async () => {
      const { log, lines } = collectingLogger();
      const backend = createBackend('none', { workDir });
      assert.equal(backend.name, 'none');
      const p = initParams(log);
      const result = await backend.init(p);
      assert.equal(
        result.message,
        'Kubernetes is not run on local process nodes (backend none): the cluster runs attestation, the join service and the state disks, but no API server.',
      );
      assert.deepEqual(result.kubeconfig, p.adminKubeconfig);
      assert.ok(lines.some((line) => line.includes(NOT_RUN_NOTICE)));
      const record = JSON.parse(await fs.readFile(path.join(workDir, 'kubernetes-none-init.json'), 'utf8'));
      assert.deepEqual(record.received.pkiFiles, [...CA_FILES].sort());
      assert.ok(!JSON.stringify(record).includes('contents of ca.key'), 'no PKI contents are recorded');
    });

    it('join records what it received without the token and says Kubernetes is not run', async () => {
      const { log, lines } = collectingLogger();
      const p = joinParams(log, { kubeletCert: Buffer.from('cert') });
      const result = await createBackend('none', { workDir }).join(p);
      assert.ok(result.message.startsWith(NOT_RUN_NOTICE));
      assert.match(result.message, /worker-0 joined the cluster as a worker, but no kubelet runs on it/);
      const text = await fs.readFile(path.join(workDir, 'kubernetes-none-join.json'), 'utf8');
      const record = JSON.parse(text);
      assert.equal(record.received.nodeName, 'worker-0');
      assert.equal(record.received.discoveryTokenCaCertHash, p.discoveryTokenCaCertHash);
      assert.equal(record.received.kubeletCertificate, true);
      assert.ok(!text.includes(p.token) && !text.includes(p.token.split('.')[1]!));
      assert.ok(!lines.join('\n').includes(p.token.split('.')[1]!));
    });

    it('keeps the join service\'s tokens in memory, one sink for the backend', async () => {
      const { log } = collectingLogger();
      const backend = createBackend('none', { workDir });
      const sink = backend.tokenSink(log);
      assert.ok(sink instanceof MemoryTokenSink);
      assert.equal(backend.tokenSink(log), sink);
      const token = bootstrapToken();
      await sink.register(token);
      assert.ok(sink.isValid(token.token));
    });
  });

  describe('kubeadm (stand-in kubeadm on PATH)', () => {
    let standin: Standin;
    const backend = () => createBackend('kubeadm', { workDir, pkiDir: standin.pkiDir, adminConfPath: standin.adminConf, env: standin.env });

    beforeEach(async () => {
      standin = await installStandinKubeadm(dir);
    });

    it('init writes the PKI, generates Init- and ClusterConfiguration, runs kubeadm init and returns admin.conf', async () => {
      const { log, lines } = collectingLogger();
      const result = await backend().init(initParams(log));
      assert.equal(Buffer.from(result.kubeconfig).toString(), ADMIN_CONF_CONTENT);
      assert.match(result.message, /Kubernetes v1\.31\.2 initialized with kubeadm on control-plane-0/);

      const [call, ...more] = await standin.calls();
      assert.equal(more.length, 0);
      assert.deepEqual(call!.args, ['init', '--config', path.join(workDir, 'kubeadm-init.yaml'), '--skip-phases=preflight']);
      const [init, cluster] = call!.docs as [Record<string, any>, Record<string, any>]; // eslint-disable-line @typescript-eslint/no-explicit-any
      assert.deepEqual(init.localAPIEndpoint, { advertiseAddress: '10.9.0.10', bindPort: 6443 });
      assert.deepEqual(init.nodeRegistration, { name: 'control-plane-0', kubeletExtraArgs: [{ name: 'node-ip', value: '10.9.0.10' }] });
      assert.equal(cluster.kubernetesVersion, 'v1.31.2');
      assert.equal(cluster.controlPlaneEndpoint, '34.1.2.3:6443');
      assert.equal(cluster.clusterName, 'demo');
      assert.deepEqual(cluster.apiServer.certSANs, ['34.1.2.3', 'demo.example.com']);
      assert.deepEqual(cluster.networking, { serviceSubnet: '10.96.0.0/12', podSubnet: '10.244.0.0/16' });

      assert.equal((await fs.readFile(path.join(standin.pkiDir, 'etcd/ca.crt'), 'utf8')), 'contents of etcd/ca.crt\n');
      assert.equal((await fs.stat(path.join(standin.pkiDir, 'ca.key'))).mode & 0o777, 0o600);
      assert.equal((await fs.stat(path.join(standin.pkiDir, 'ca.crt'))).mode & 0o777, 0o644);

      const log_ = lines.join('\n');
      assert.match(log_, /Your Kubernetes control-plane has initialized successfully/, 'kubeadm output is streamed to the log');
      assert.ok(!log_.includes(PRINTED_INIT_TOKEN), 'the token kubeadm init printed is redacted');
      assert.ok(!log_.includes(PRINTED_CERTIFICATE_KEY), 'the certificate key kubeadm init printed is redacted');
    });

    it('a worker joins with a JoinConfiguration holding the bootstrap token, its kubelet certificate and no controlPlane', async () => {
      const { log, lines } = collectingLogger();
      const p = joinParams(log, { kubeletCert: Buffer.from('kubelet cert'), kubeletKey: Buffer.from('kubelet key') });
      const result = await backend().join(p);
      assert.match(result.message, /worker-0 joined the Kubernetes cluster at https:\/\/34\.1\.2\.3:6443 as a worker/);

      const [call] = await standin.calls();
      const configFile = path.join(workDir, 'kubeadm-join.yaml');
      assert.deepEqual(call!.args, ['join', '--config', configFile]);
      assert.equal(call!.configMode, 0o600);
      const [join] = call!.docs as [Record<string, any>]; // eslint-disable-line @typescript-eslint/no-explicit-any
      assert.deepEqual(join.discovery.bootstrapToken, {
        apiServerEndpoint: '34.1.2.3:6443',
        token: p.token,
        caCertHashes: [p.discoveryTokenCaCertHash],
      });
      assert.equal(join.controlPlane, undefined);
      assert.equal(join.nodeRegistration.name, 'worker-0');
      assert.deepEqual(join.nodeRegistration.kubeletExtraArgs, [
        { name: 'node-ip', value: '10.9.0.20' },
        { name: 'tls-cert-file', value: path.join(standin.pkiDir, 'kubelet.crt') },
        { name: 'tls-private-key-file', value: path.join(standin.pkiDir, 'kubelet.key') },
      ]);
      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'kubelet.key'), 'utf8'), 'kubelet key');
      await assert.rejects(fs.stat(path.join(standin.pkiDir, 'ca.key')), 'a worker gets no CA files');
      await assert.rejects(fs.stat(configFile), 'the config with the token is removed after the join');
      const log_ = lines.join('\n');
      assert.match(log_, /This node has joined the cluster/);
      assert.ok(!log_.includes(p.token.split('.')[1]!), 'the token is not logged');
    });

    it('a control-plane node gets the CA files before kubeadm join and a controlPlane section', async () => {
      const { log } = collectingLogger();
      await backend().join(joinParams(log, { nodeName: 'control-plane-1', nodeIp: '10.9.0.11', isControlPlane: true, controlPlaneFiles: pkiFiles() }));
      const [call] = await standin.calls();
      const [join] = call!.docs as [Record<string, any>]; // eslint-disable-line @typescript-eslint/no-explicit-any
      assert.deepEqual(join.controlPlane, { localAPIEndpoint: { advertiseAddress: '10.9.0.11', bindPort: 6443 } });
      assert.deepEqual(join.nodeRegistration.kubeletExtraArgs, [{ name: 'node-ip', value: '10.9.0.11' }]);
      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'sa.key'), 'utf8'), 'contents of sa.key\n');
    });

    it('a failing kubeadm surfaces the tail of its stderr without the token', async () => {
      const { log, lines } = collectingLogger();
      const p = joinParams(log);
      const failing = createBackend('kubeadm', { workDir, pkiDir: standin.pkiDir, env: { ...standin.env, STANDIN_FAIL: '1' } });
      const err = await failing.join(p).then(
        () => assert.fail('the join succeeded'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof KubernetesBackendError);
      assert.match(err.message, /^kubeadm join failed with exit code 1:/);
      assert.match(err.message, /error execution phase kubelet-start: could not authenticate with token \[redacted\]/);
      assert.match(err.message, /To see the stack trace/);
      const secretHalf = p.token.split('.')[1]!;
      assert.ok(!err.message.includes(secretHalf) && !lines.join('\n').includes(secretHalf));
      await assert.rejects(fs.stat(path.join(workDir, 'kubeadm-join.yaml')), 'the config with the token is removed after a failure too');
    });

    describe('token sink', () => {
      const tokenCreateArgs = (token: string) =>
        ['token', 'create', token, '--ttl', '15m0s', '--description', 'constellation join ticket', '--kubeconfig', standin.adminConf];

      it('registers a token with kubeadm token create: the token, --ttl 15m0s and the admin kubeconfig; the token is not logged', async () => {
        await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
        await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
        const { log, lines } = collectingLogger();
        const token = bootstrapToken();
        await backend().tokenSink(log).register(token);

        const [call, ...more] = await standin.calls();
        assert.equal(more.length, 0);
        assert.deepEqual(call!.args, tokenCreateArgs(token.token));
        const log_ = lines.join('\n');
        assert.match(log_, /running kubeadm token create/);
        assert.ok(log_.includes(`bootstrap token ${token.id} registered with the API server`), 'the public token id is logged');
        assert.ok(!log_.includes(token.token.split('.')[1]!), 'the token secret is not logged (kubeadm printed it)');
      });

      it('refuses clearly on a node without the admin kubeconfig, without running kubeadm', async () => {
        const { log } = collectingLogger();
        const token = bootstrapToken();
        await assert.rejects(backend().tokenSink(log).register(token), (err: Error) => {
          assert.ok(err instanceof KubernetesBackendError);
          assert.equal(err.message, `This node has no admin kubeconfig at ${standin.adminConf}, so it cannot register the bootstrap token with the API server.`);
          assert.match(err.hint ?? '', /Only a control-plane node that initialized the cluster or joined it as a control-plane node has one/);
          assert.ok(!err.message.includes(token.token.split('.')[1]!));
          return true;
        });
        assert.deepEqual(await standin.calls(), []);
      });

      it('a failing kubeadm token create surfaces the tail of its stderr without the token', async () => {
        await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
        await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
        const { log, lines } = collectingLogger();
        const token = bootstrapToken();
        const failing = createBackend('kubeadm', { workDir, pkiDir: standin.pkiDir, adminConfPath: standin.adminConf, env: { ...standin.env, STANDIN_FAIL: '1' } });
        const err = await failing.tokenSink(log).register(token).then(
          () => assert.fail('the token was registered'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof KubernetesBackendError);
        assert.match(err.message, /^kubeadm token create failed with exit code 1:/);
        assert.match(err.message, /creating token \[redacted\]/);
        assert.match(err.message, new RegExp(`failed to create or update bootstrap token with name bootstrap-token-${token.id}: Unauthorized`));
        assert.match(err.message, /To see the stack trace/);
        const secretHalf = token.token.split('.')[1]!;
        assert.ok(!err.message.includes(secretHalf) && !lines.join('\n').includes(secretHalf));
        assert.deepEqual((await standin.calls()).map((c) => c.args), [tokenCreateArgs(token.token)]);
      });
    });

    it('says so when kubeadm is not installed', async () => {
      const { log } = collectingLogger();
      const emptyBin = path.join(dir, 'empty');
      await fs.mkdir(emptyBin);
      const missing = createBackend('kubeadm', { workDir, pkiDir: standin.pkiDir, env: { PATH: emptyBin } });
      await assert.rejects(missing.init(initParams(log)), /kubeadm was not found on PATH/);
    });

    it('refuses malformed join material before running kubeadm, without echoing the token', async () => {
      const { log } = collectingLogger();
      const badToken = 'NOT-A-TOKEN-s3cr3t';
      await assert.rejects(backend().join(joinParams(log, { token: badToken })), (err: Error) => {
        assert.ok(err instanceof KubernetesBackendError);
        assert.ok(!err.message.includes(badToken));
        return true;
      });
      await assert.rejects(backend().join(joinParams(log, { apiServerEndpoint: '34.1.2.3' })), /host:port/);
      assert.deepEqual(await standin.calls(), []);
    });
  });
});
