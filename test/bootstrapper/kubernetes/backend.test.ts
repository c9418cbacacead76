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
import { X509Certificate } from 'node:crypto';
import { MemoryTokenSink, type BootstrapToken } from '../../../joinservice/bootstrap-token.js';
import { createClusterPki } from '../../../lib/pki/cluster-pki.js';
import { createLogger, type Logger } from '../../../lib/logging/index.js';
import { UserError } from '../../../lib/errors.js';
import { CCM_IMAGES } from '../../../bootstrapper/kubernetes/cloud-controller.js';
import { SUPPORTED_KUBERNETES_VERSIONS } from '../../../lib/config/versions.js';
import type { CloudControllerValues } from '../../../providers/contract.js';
import {
  ADMIN_CONF_CONTENT,
  installStandinKubeadm,
  PRINTED_CERTIFICATE_KEY,
  PRINTED_INIT_TOKEN,
  type Standin,
} from './standin-kubeadm.js';

const CA_FILES = [
  'ca.crt',
  'ca.key',
  'front-proxy-ca.crt',
  'front-proxy-ca.key',
  'etcd/ca.crt',
  'etcd/ca.key',
  'sa.key',
  'sa.pub',
];
/** A real cluster PKI (the first control plane's kubelet certificate is signed with its CA), made once. */
const PKI = createClusterPki({ clock: () => new Date(), clusterName: 'demo' });
const pkiFiles = () => Object.fromEntries(Object.entries(PKI).map(([name, text]) => [name, Buffer.from(text)]));
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
    certSANs: ['34.1.2.3', 'demo.example.com', '34.1.2.3', '', ' '],
    serviceCIDR: '10.96.0.0/12',
    podCIDR: '10.244.0.0/16',
    nodeCIDR: '10.9.0.0/16',
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
    assert.throws(
      () => createBackend('k3s', { workDir }),
      (err: unknown) => err instanceof KubernetesBackendError && /none, kubeadm/.test(err.hint ?? ''),
    );
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
        'Kubernetes does not run on this cluster (backend none): the cluster runs attestation, the join service and the state disks, but no API server.',
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

    it('an in-place upgrade records the new version (without running anything) and refuses a skipped minor version', async () => {
      const { log } = collectingLogger();
      const backend = createBackend('none', { workDir });
      const result = await backend.upgradeControlPlane({
        nodeName: 'control-plane-1',
        version: 'v1.32.10',
        from: 'v1.31.14',
        first: false,
        log,
      });
      assert.equal(
        result.message,
        `${NOT_RUN_NOTICE}: control-plane-1 now counts as running Kubernetes v1.32.10 (was v1.31.14); there is no kubeadm upgrade to run.`,
      );
      const record = JSON.parse(await fs.readFile(path.join(workDir, 'kubernetes-none-upgrade.json'), 'utf8'));
      assert.deepEqual(record.received, {
        nodeName: 'control-plane-1',
        from: 'v1.31.14',
        version: 'v1.32.10',
        first: false,
      });
      await assert.rejects(
        backend.upgradeControlPlane({
          nodeName: 'control-plane-1',
          version: 'v1.33.6',
          from: 'v1.31.14',
          first: true,
          log,
        }),
        /from v1\.31\.14 to v1\.33\.6 in one upgrade/,
      );
    });

    it("keeps the join service's tokens in memory, one sink for the backend", async () => {
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

  describe('kubeadm (stand-in kubeadm and kubectl on PATH)', () => {
    let standin: Standin;
    let wireGuard: boolean;
    let cloud: CloudControllerValues | undefined;
    const backend = () =>
      createBackend('kubeadm', {
        workDir,
        pkiDir: standin.pkiDir,
        adminConfPath: standin.adminConf,
        manifestsDir: standin.manifestsDir,
        env: standin.env,
        hasWireGuard: async () => wireGuard,
        ...(cloud ? { cloudController: async () => cloud! } : {}),
      });
    type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const args = (list: { name: string; value: string }[]) => Object.fromEntries(list.map((a) => [a.name, a.value]));

    beforeEach(async () => {
      standin = await installStandinKubeadm(dir);
      wireGuard = true;
      cloud = undefined;
    });

    it('init runs preflight, then certs, then init without those phases and kube-proxy, on an emptied static Pod directory', async () => {
      // A static Pod of an earlier, failed attempt.
      await fs.mkdir(standin.manifestsDir, { recursive: true });
      await fs.writeFile(path.join(standin.manifestsDir, 'kube-apiserver.yaml'), 'stale');
      const { log } = collectingLogger();
      await backend().init(initParams(log));
      const calls = await standin.calls();
      const configFile = path.join(workDir, 'kubeadm-init.yaml');
      assert.deepEqual(
        calls.map((c) => [c.program, ...c.args]),
        [
          ['kubeadm', 'init', 'phase', 'preflight', '--config', configFile],
          ['kubeadm', 'init', 'phase', 'certs', 'all', '--config', configFile],
          ['kubeadm', 'init', '--config', configFile, '--skip-phases=preflight,certs,addon/kube-proxy'],
          [
            'kubectl',
            'apply',
            '--server-side',
            '--force-conflicts',
            '--kubeconfig',
            standin.adminConf,
            '-f',
            path.join(workDir, 'cilium.yaml'),
          ],
        ],
      );
      assert.deepEqual(calls[0]!.manifests, [], 'the stale static Pod was removed before kubeadm ran');
    });

    it('init generates Init-, Cluster- and KubeletConfiguration as upstream: CRI socket, podSubnet, filtered SANs, kubelets verified', async () => {
      const { log, lines } = collectingLogger();
      const result = await backend().init(initParams(log));
      assert.equal(Buffer.from(result.kubeconfig).toString(), ADMIN_CONF_CONTENT);
      assert.match(
        result.message,
        /Kubernetes v1\.31\.2 initialized with kubeadm on control-plane-0; API server at https:\/\/34\.1\.2\.3:6443; network plugin Cilium 1\.15\.19-edg\.0 with WireGuard encryption\./,
      );

      const [init, cluster, kubelet] = (await standin.calls())[2]!.docs as [Doc, Doc, Doc];
      assert.deepEqual(init.localAPIEndpoint, { advertiseAddress: '10.9.0.10', bindPort: 6443 });
      assert.deepEqual(init.nodeRegistration, {
        name: 'control-plane-0',
        criSocket: 'unix:///run/containerd/containerd.sock',
        kubeletExtraArgs: [{ name: 'node-ip', value: '10.9.0.10' }],
      });
      assert.equal(cluster.kubernetesVersion, 'v1.31.2');
      assert.equal(cluster.controlPlaneEndpoint, '34.1.2.3:6443');
      assert.equal(cluster.clusterName, 'demo');
      assert.deepEqual(
        cluster.apiServer.certSANs,
        ['127.0.0.1', '10.9.0.10', '34.1.2.3', 'demo.example.com'],
        'no empty SAN, no duplicate',
      );
      assert.equal(
        args(cluster.apiServer.extraArgs)['kubelet-certificate-authority'],
        path.join(standin.pkiDir, 'ca.crt'),
      );
      assert.equal(
        args(cluster.controllerManager.extraArgs)['cloud-provider'],
        undefined,
        'no cloud provider on a node without a provider id',
      );
      assert.deepEqual(cluster.networking, { serviceSubnet: '10.96.0.0/12', podSubnet: '10.244.0.0/16' });
      assert.deepEqual(kubelet, {
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        tlsCertFile: path.join(standin.pkiDir, 'kubelet.crt'),
        tlsPrivateKeyFile: path.join(standin.pkiDir, 'kubelet.key'),
        staticPodPath: '/etc/kubernetes/manifests',
      });

      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'etcd/ca.crt'), 'utf8'), PKI['etcd/ca.crt']);
      assert.equal((await fs.stat(path.join(standin.pkiDir, 'ca.key'))).mode & 0o777, 0o600);
      assert.equal((await fs.stat(path.join(standin.pkiDir, 'ca.crt'))).mode & 0o777, 0o644);

      const log_ = lines.join('\n');
      assert.match(
        log_,
        /Your Kubernetes control-plane has initialized successfully/,
        'kubeadm output is streamed to the log',
      );
      assert.ok(!log_.includes(PRINTED_INIT_TOKEN), 'the token kubeadm init printed is redacted');
      assert.ok(!log_.includes(PRINTED_CERTIFICATE_KEY), 'the certificate key kubeadm init printed is redacted');
    });

    it("the first control plane's kubelet serves a certificate the cluster CA signed for its name and IP", async () => {
      const { log } = collectingLogger();
      await backend().init(initParams(log));
      const cert = new X509Certificate(await fs.readFile(path.join(standin.pkiDir, 'kubelet.crt')));
      assert.ok(
        cert.checkIssued(new X509Certificate(PKI['ca.crt'])) &&
          cert.verify(new X509Certificate(PKI['ca.crt']).publicKey),
      );
      assert.match(cert.subject, /CN=system:node:control-plane-0/);
      assert.match(cert.subjectAltName ?? '', /IP Address:10\.9\.0\.10/);
      assert.equal((await fs.stat(path.join(standin.pkiDir, 'kubelet.key'))).mode & 0o777, 0o600);
    });

    it("installs Cilium with the cluster's API server, pod and node networks and WireGuard strict mode", async () => {
      const { log } = collectingLogger();
      await backend().init(initParams(log));
      const apply = (await standin.calls()).find((c) => c.program === 'kubectl')!;
      const kinds = apply.docs.map((d) => `${String(d.kind)}/${String((d.metadata as Doc).name)}`);
      assert.ok(
        kinds.includes('DaemonSet/cilium') &&
          kinds.includes('Deployment/cilium-operator') &&
          kinds.includes('ConfigMap/cilium-config'),
        kinds.join(' '),
      );
      const config = (
        apply.docs.find((d) => d.kind === 'ConfigMap' && (d.metadata as Doc).name === 'cilium-config') as Doc
      ).data;
      assert.equal(config['enable-wireguard'], 'true');
      assert.equal(config['enable-encryption-strict-mode'], 'true');
      assert.equal(config['encryption-strict-mode-pod-cidrs'], '10.244.0.0/16');
      assert.equal(config['encryption-strict-mode-node-cidrs'], '10.9.0.0/16');
      assert.equal(config.ipam, 'kubernetes');
      assert.equal(config['kube-proxy-replacement'], 'strict');
      const agent = (apply.docs.find((d) => d.kind === 'DaemonSet') as Doc).spec.template.spec.containers[0];
      assert.deepEqual(
        agent.env.find((e: Doc) => e.name === 'KUBERNETES_SERVICE_HOST'),
        { name: 'KUBERNETES_SERVICE_HOST', value: '34.1.2.3' },
      );
      assert.match(
        agent.image,
        /^ghcr\.io\/edgelesssys\/cilium\/cilium:v1\.15\.19-edg\.0@sha256:[0-9a-f]{64}$/,
        'pinned by digest',
      );
      assert.ok(
        !JSON.stringify(apply.docs).includes('192.0.2.0/24') && !JSON.stringify(apply.docs).includes('.invalid'),
        'no placeholder is left',
      );
    });

    it('on a kernel without WireGuard installs Cilium without encryption and says so', async () => {
      wireGuard = false;
      const { log, lines } = collectingLogger();
      const result = await backend().init(initParams(log));
      assert.match(
        result.message,
        /network plugin Cilium 1\.15\.19-edg\.0 WITHOUT encryption \(this kernel has no WireGuard\)/,
      );
      const apply = (await standin.calls()).find((c) => c.program === 'kubectl')!;
      const config = (
        apply.docs.find((d) => d.kind === 'ConfigMap' && (d.metadata as Doc).name === 'cilium-config') as Doc
      ).data;
      assert.deepEqual(
        [config['enable-wireguard'], config['encrypt-node'], config['enable-encryption-strict-mode']],
        ['false', 'false', 'false'],
      );
      assert.ok(lines.some((l) => l.includes('Cilium runs without transparent encryption')));
    });

    it('a cloud node runs its kubelet with cloud-provider=external and its provider-id; the controller manager too', async () => {
      cloud = { cloud: 'gcp', projectId: 'proj', nodeTag: 'constell-a1b2' };
      const { log } = collectingLogger();
      await backend().init({ ...initParams(log), providerId: 'gce://proj/europe-west3-b/cp-0' });
      const [init, cluster] = (await standin.calls())[2]!.docs as [Doc, Doc];
      assert.deepEqual(init.nodeRegistration.kubeletExtraArgs, [
        { name: 'node-ip', value: '10.9.0.10' },
        { name: 'cloud-provider', value: 'external' },
        { name: 'provider-id', value: 'gce://proj/europe-west3-b/cp-0' },
      ]);
      assert.equal(args(cluster.controllerManager.extraArgs)['cloud-provider'], 'external');
      await backend().join(joinParams(log, { providerId: 'gce://proj/europe-west3-b/wk-0' }));
      const [join] = (await standin.calls()).at(-1)!.docs as [Doc];
      assert.deepEqual(args(join.nodeRegistration.kubeletExtraArgs), {
        'node-ip': '10.9.0.20',
        'cloud-provider': 'external',
        'provider-id': 'gce://proj/europe-west3-b/wk-0',
      });
    });

    describe('cloud controller manager (nodes lose the uninitialized taint only when one runs)', () => {
      const ccmApply = async () => {
        const applies = (await standin.calls()).filter((c) => c.program === 'kubectl');
        assert.equal(applies.length, 2, 'Cilium, then the cloud controller manager');
        return applies[1]!.docs;
      };
      const named = (docs: Doc[], kind: string, name: string) =>
        docs.find((d) => d.kind === kind && d.metadata.name === name) as Doc;
      const digestPinned = /^[a-z0-9.\-/]+:v[0-9.]+@sha256:[0-9a-f]{64}$/;

      it("aws: the AWS CCM on the control planes, pinned by digest for the cluster's Kubernetes minor version, tolerating the uninitialized taint", async () => {
        cloud = { cloud: 'aws' };
        const { log } = collectingLogger();
        const result = await backend().init({
          ...initParams(log),
          kubernetesVersion: 'v1.32.10',
          providerId: 'aws:///us-east-2a/i-0123456789abcdef0',
        });
        assert.match(result.message, /aws cloud controller manager/);
        const docs = await ccmApply();
        const ds = named(docs, 'DaemonSet', 'cloud-controller-manager');
        const container = ds.spec.template.spec.containers[0];
        assert.equal(container.image, CCM_IMAGES['1.32']!.aws.ccm);
        assert.match(
          container.image,
          /^registry\.k8s\.io\/provider-aws\/cloud-controller-manager:v1\.32\.\d+@sha256:[0-9a-f]{64}$/,
        );
        assert.ok(container.args.includes('--cloud-provider=aws'));
        assert.deepEqual(ds.spec.template.spec.nodeSelector, { 'node-role.kubernetes.io/control-plane': '' });
        assert.ok(
          ds.spec.template.spec.tolerations.some(
            (t: Doc) => t.key === 'node.cloudprovider.kubernetes.io/uninitialized',
          ),
        );
        assert.ok(named(docs, 'ServiceAccount', 'cloud-controller-manager'));
        assert.ok(!JSON.stringify(docs).includes('.invalid'), 'no placeholder is left');
      });

      it("gcp: gce.conf names the project and the nodes' network tag; the CCM uses the VM's service account (no key Secret, no GOOGLE_APPLICATION_CREDENTIALS)", async () => {
        cloud = { cloud: 'gcp', projectId: 'proj-1', nodeTag: 'constell-a1b2c3d4' };
        const { log } = collectingLogger();
        await backend().init({
          ...initParams(log),
          kubernetesVersion: 'v1.31.14',
          providerId: 'gce://proj-1/europe-west3-b/cp-0',
        });
        const docs = await ccmApply();
        const conf = named(docs, 'ConfigMap', 'gceconf').data['gce.conf'] as string;
        assert.match(conf, /^project-id = proj-1$/m);
        assert.match(conf, /^node-tags = constell-a1b2c3d4$/m);
        assert.match(conf, /^use-metadata-server = true$/m);
        assert.doesNotMatch(conf, /token-url/);
        const container = named(docs, 'DaemonSet', 'cloud-controller-manager').spec.template.spec.containers[0];
        assert.equal(container.image, CCM_IMAGES['1.31']!.gcp.ccm);
        assert.match(container.image, digestPinned);
        assert.ok(
          container.command.includes('--cloud-config=/etc/gce/gce.conf') &&
            container.command.includes('--controllers=cloud-node,cloud-node-lifecycle'),
        );
        assert.equal(container.env, undefined);
        assert.ok(!docs.some((d) => d.kind === 'Secret'), 'no service-account key goes into the cluster');
        assert.ok(!JSON.stringify(docs).includes('upgrade-agent'), 'no hostPath socket that our nodes do not have');
      });

      it('azure: azure.json in a Secret (subscription, resource group, location, security group, managed identity) and the cloud-node-manager, both pinned', async () => {
        cloud = {
          cloud: 'azure',
          subscriptionId: '00000000-0000-0000-0000-000000000001',
          resourceGroup: 'rg-1',
          location: 'westeurope',
          securityGroupName: 'demo-a1b2-nsg',
        };
        const { log } = collectingLogger();
        await backend().init({
          ...initParams(log),
          kubernetesVersion: 'v1.33.6',
          providerId:
            'azure:///subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachineScaleSets/demo-cp/virtualMachines/0',
        });
        const docs = await ccmApply();
        const config = JSON.parse(
          Buffer.from(named(docs, 'Secret', 'azureconfig').data['azure.json'], 'base64').toString('utf8'),
        );
        assert.deepEqual(config, {
          cloud: 'AzurePublicCloud',
          subscriptionId: '00000000-0000-0000-0000-000000000001',
          resourceGroup: 'rg-1',
          location: 'westeurope',
          securityGroupName: 'demo-a1b2-nsg',
          loadBalancerSku: 'standard',
          loadBalancerName: 'kubernetes-lb',
          useInstanceMetadata: true,
          vmType: 'vmss',
          useManagedIdentityExtension: true,
        });
        const ccm = named(docs, 'DaemonSet', 'cloud-controller-manager').spec.template.spec;
        assert.equal(
          ccm.containers[0].image,
          CCM_IMAGES['1.33']!.azure.ccm,
          '1.33 runs the pinned 1.32 CCM (one minor older is within the skew policy)',
        );
        assert.ok(ccm.containers[0].command.includes('--controllers=*,-cloud-node'));
        assert.deepEqual(ccm.volumes.find((v: Doc) => v.name === 'azureconfig').secret, { secretName: 'azureconfig' });
        const cnm = named(docs, 'DaemonSet', 'cloud-node-manager').spec.template.spec.containers[0];
        assert.equal(cnm.image, CCM_IMAGES['1.33']!.azure.cnm);
        assert.match(cnm.image, digestPinned);
        assert.ok(!JSON.stringify(docs).includes('.invalid'), 'no placeholder is left');
      });

      it('every supported Kubernetes version has a digest-pinned CCM for every cloud', () => {
        for (const version of SUPPORTED_KUBERNETES_VERSIONS) {
          const pins = CCM_IMAGES[version.slice(1).split('.').slice(0, 2).join('.')];
          assert.ok(pins, version);
          for (const images of Object.values(pins))
            for (const image of Object.values(images))
              assert.match(image as string, digestPinned, `${version}: ${String(image)}`);
        }
      });

      it('a node with a provider id but no cloud values refuses instead of leaving its nodes tainted', async () => {
        const { log } = collectingLogger();
        await assert.rejects(
          backend().init({ ...initParams(log), providerId: 'gce://proj/europe-west3-b/cp-0' }),
          (err: unknown) =>
            err instanceof KubernetesBackendError &&
            /no cloud controller manager is known for it: its nodes would keep the taint node\.cloudprovider\.kubernetes\.io\/uninitialized/.test(
              err.message,
            ),
        );
      });

      it('a process node (no provider id) gets no cloud controller manager', async () => {
        const { log } = collectingLogger();
        await backend().init(initParams(log));
        assert.equal((await standin.calls()).filter((c) => c.program === 'kubectl').length, 1, 'Cilium only');
      });
    });

    it('refuses Kubernetes older than 1.31 (kubeadm v1beta4) before running anything', async () => {
      const { log } = collectingLogger();
      await assert.rejects(
        backend().init({ ...initParams(log), kubernetesVersion: 'v1.30.6' }),
        (err: unknown) =>
          err instanceof KubernetesBackendError &&
          /Kubernetes v1\.30\.6 is too old for the kubeadm backend/.test(err.message) &&
          /v1\.31/.test(err.hint ?? ''),
      );
      await assert.rejects(backend().join(joinParams(log, { kubernetesVersion: '1.29.0' })), /too old/);
      assert.deepEqual(await standin.calls(), []);
    });

    it('a worker joins with a JoinConfiguration holding the bootstrap token and CRI socket; its kubelet certificate is where the kubelet config says', async () => {
      await fs.mkdir(standin.manifestsDir, { recursive: true });
      await fs.writeFile(path.join(standin.manifestsDir, 'stale.yaml'), 'stale');
      const { log, lines } = collectingLogger();
      const p = joinParams(log, { kubeletCert: Buffer.from('kubelet cert'), kubeletKey: Buffer.from('kubelet key') });
      const result = await backend().join(p);
      assert.match(result.message, /worker-0 joined the Kubernetes cluster at https:\/\/34\.1\.2\.3:6443 as a worker/);

      const [call] = await standin.calls();
      const configFile = path.join(workDir, 'kubeadm-join.yaml');
      assert.deepEqual(call!.args, ['join', '--config', configFile]);
      assert.equal(call!.configMode, 0o600);
      assert.deepEqual(call!.manifests, [], 'the static Pod directory was emptied');
      const [join] = call!.docs as [Doc];
      assert.deepEqual(join.discovery.bootstrapToken, {
        apiServerEndpoint: '34.1.2.3:6443',
        token: p.token,
        caCertHashes: [p.discoveryTokenCaCertHash],
      });
      assert.equal(join.controlPlane, undefined);
      assert.deepEqual(join.nodeRegistration, {
        name: 'worker-0',
        criSocket: 'unix:///run/containerd/containerd.sock',
        kubeletExtraArgs: [{ name: 'node-ip', value: '10.9.0.20' }],
      });
      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'kubelet.crt'), 'utf8'), 'kubelet cert');
      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'kubelet.key'), 'utf8'), 'kubelet key');
      await assert.rejects(fs.stat(path.join(standin.pkiDir, 'ca.key')), 'a worker gets no CA files');
      await assert.rejects(fs.stat(configFile), 'the config with the token is removed after the join');
      const log_ = lines.join('\n');
      assert.match(log_, /This node has joined the cluster/);
      assert.ok(!log_.includes(p.token.split('.')[1]!), 'the token is not logged');
    });

    it('a control-plane node gets the CA files before kubeadm join, a controlPlane section, and skips downloading certificates', async () => {
      const { log } = collectingLogger();
      await backend().join(
        joinParams(log, {
          nodeName: 'control-plane-1',
          nodeIp: '10.9.0.11',
          isControlPlane: true,
          controlPlaneFiles: pkiFiles(),
        }),
      );
      const [call] = await standin.calls();
      const [join] = call!.docs as [Doc];
      assert.deepEqual(join.controlPlane, { localAPIEndpoint: { advertiseAddress: '10.9.0.11', bindPort: 6443 } });
      assert.deepEqual(join.skipPhases, ['control-plane-prepare/download-certs']);
      assert.equal(await fs.readFile(path.join(standin.pkiDir, 'sa.key'), 'utf8'), PKI['sa.key']);
    });

    it('a failing kubeadm surfaces the tail of its stderr without the token', async () => {
      const { log, lines } = collectingLogger();
      const p = joinParams(log);
      const failing = createBackend('kubeadm', {
        workDir,
        pkiDir: standin.pkiDir,
        manifestsDir: standin.manifestsDir,
        env: { ...standin.env, STANDIN_FAIL: '1' },
      });
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
      await assert.rejects(
        fs.stat(path.join(workDir, 'kubeadm-join.yaml')),
        'the config with the token is removed after a failure too',
      );
    });

    describe('token sink', () => {
      const applyArgs = (id: string) => [
        'apply',
        '--server-side',
        '--force-conflicts',
        '--kubeconfig',
        standin.adminConf,
        '-f',
        path.join(workDir, `bootstrap-token-${id}.yaml`),
      ];

      it("registers a token as kubeadm's bootstrap-token Secret through kubectl, from a file it removes: never on a command line, never logged", async () => {
        await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
        await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
        const { log, lines } = collectingLogger();
        const token = bootstrapToken();
        await backend().tokenSink(log).register(token);

        const [call, ...more] = await standin.calls();
        assert.equal(more.length, 0);
        assert.equal(call!.program, 'kubectl');
        assert.deepEqual(call!.args, applyArgs(token.id));
        assert.ok(
          !call!.args.join(' ').includes(token.token.split('.')[1]!),
          'the token secret is not on the command line',
        );
        assert.deepEqual(call!.docs, [
          {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name: `bootstrap-token-${token.id}`, namespace: 'kube-system' },
            type: 'bootstrap.kubernetes.io/token',
            stringData: {
              description: 'constellation join ticket',
              'token-id': token.id,
              'token-secret': token.token.split('.')[1],
              expiration: token.expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
              'usage-bootstrap-authentication': 'true',
              'usage-bootstrap-signing': 'true',
              'auth-extra-groups': 'system:bootstrappers:kubeadm:default-node-token',
            },
          },
        ]);
        await assert.rejects(fs.stat(applyArgs(token.id).at(-1)!), 'the file with the token is removed');
        const log_ = lines.join('\n');
        assert.match(log_, /running kubectl bootstrap token/);
        assert.ok(
          log_.includes(`bootstrap token ${token.id} registered with the API server`),
          'the public token id is logged',
        );
        assert.ok(!log_.includes(token.token.split('.')[1]!), 'the token secret is not logged (kubeadm printed it)');
      });

      it('refuses clearly on a node without the admin kubeconfig, without running kubeadm', async () => {
        const { log } = collectingLogger();
        const token = bootstrapToken();
        await assert.rejects(backend().tokenSink(log).register(token), (err: Error) => {
          assert.ok(err instanceof KubernetesBackendError);
          assert.equal(
            err.message,
            `This node has no admin kubeconfig at ${standin.adminConf}, so it cannot register the bootstrap token with the API server.`,
          );
          assert.match(
            err.hint ?? '',
            /Only a control-plane node that initialized the cluster or joined it as a control-plane node has one/,
          );
          assert.ok(!err.message.includes(token.token.split('.')[1]!));
          return true;
        });
        assert.deepEqual(await standin.calls(), []);
      });

      it('a failing kubectl apply of the token surfaces the tail of its stderr without the token, and removes the file', async () => {
        await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
        await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
        const { log, lines } = collectingLogger();
        const token = bootstrapToken();
        const failing = createBackend('kubeadm', {
          workDir,
          pkiDir: standin.pkiDir,
          adminConfPath: standin.adminConf,
          env: { ...standin.env, STANDIN_FAIL_KUBECTL: '1' },
        });
        const err = await failing
          .tokenSink(log)
          .register(token)
          .then(
            () => assert.fail('the token was registered'),
            (e: unknown) => e,
          );
        assert.ok(err instanceof KubernetesBackendError);
        assert.match(err.message, /^kubectl bootstrap token failed with exit code 1:/);
        assert.match(err.message, /unable to recognize/);
        const secretHalf = token.token.split('.')[1]!;
        assert.ok(!err.message.includes(secretHalf) && !lines.join('\n').includes(secretHalf));
        assert.deepEqual(
          (await standin.calls()).map((c) => c.args),
          [applyArgs(token.id)],
        );
        await assert.rejects(
          fs.stat(applyArgs(token.id).at(-1)!),
          'the file with the token is removed after a failure too',
        );
      });
    });

    describe("in-place upgrade of the control planes (two nodes' stand-ins sharing one cluster)", () => {
      let peer: Standin;
      const nodeBackend = (s: Standin, work: string, env: NodeJS.ProcessEnv = s.env) =>
        createBackend('kubeadm', {
          workDir: work,
          pkiDir: s.pkiDir,
          adminConfPath: s.adminConf,
          manifestsDir: s.manifestsDir,
          env,
          hasWireGuard: async () => true,
        });
      const upgrade = (over: { version?: string; from?: string; first: boolean }, log: Logger) => ({
        nodeName: over.first ? 'control-plane-0' : 'control-plane-1',
        version: over.version ?? 'v1.32.0',
        from: over.from ?? 'v1.31.2',
        first: over.first,
        log,
      });
      const upgradeCalls = async (s: Standin) =>
        (await s.calls()).filter((c) => c.args[0] === 'upgrade').map((c) => c.args);

      beforeEach(async () => {
        const clusterDir = path.join(dir, 'cluster');
        standin = await installStandinKubeadm(path.join(dir, 'cp-0'), { clusterDir });
        peer = await installStandinKubeadm(path.join(dir, 'cp-1'), { clusterDir });
        const { log } = collectingLogger();
        await nodeBackend(standin, workDir).init(initParams(log));
        const controlPlaneFiles = Object.fromEntries(CA_FILES.map((f) => [f, Buffer.from(PKI[f as keyof typeof PKI])]));
        await nodeBackend(peer, path.join(dir, 'work-1')).join(
          joinParams(log, { nodeName: 'control-plane-1', isControlPlane: true, controlPlaneFiles }),
        );
      });

      it('the first runs kubeadm upgrade apply <version> --yes, then another kubeadm upgrade node: both end at the new version', async () => {
        const { log, lines } = collectingLogger();
        const first = await nodeBackend(standin, workDir).upgradeControlPlane(upgrade({ first: true }, log));
        assert.equal(
          first.message,
          "control-plane-0 upgraded the cluster's control plane (kubeadm upgrade apply): Kubernetes v1.31.2 → v1.32.0.",
        );
        assert.deepEqual(await upgradeCalls(standin), [['upgrade', 'apply', 'v1.32.0', '--yes']]);
        assert.deepEqual(await standin.cluster(), { version: 'v1.32.0', applied: true });
        const other = await nodeBackend(peer, path.join(dir, 'work-1')).upgradeControlPlane(
          upgrade({ first: false }, log),
        );
        assert.equal(
          other.message,
          "control-plane-1 followed the cluster's upgrade (kubeadm upgrade node): Kubernetes v1.31.2 → v1.32.0.",
        );
        assert.deepEqual(await upgradeCalls(peer), [['upgrade', 'node']]);
        assert.deepEqual([await standin.nodeVersion(), await peer.nodeVersion()], ['v1.32.0', 'v1.32.0']);
        assert.match(lines.join('\n'), /SUCCESS! Your cluster was upgraded to/, "kubeadm's output is in the node log");
      });

      it('runs again after a failure or a crash part-way (the same version once more)', async () => {
        const { log } = collectingLogger();
        await nodeBackend(standin, workDir).upgradeControlPlane(upgrade({ first: true }, log));
        await nodeBackend(standin, workDir).upgradeControlPlane(upgrade({ first: true, from: 'v1.32.0' }, log));
        assert.deepEqual(await upgradeCalls(standin), [
          ['upgrade', 'apply', 'v1.32.0', '--yes'],
          ['upgrade', 'apply', 'v1.32.0', '--yes'],
        ]);
      });

      it('kubeadm upgrade node before the cluster was upgraded fails (the stand-in checks the order)', async () => {
        const { log } = collectingLogger();
        await assert.rejects(
          nodeBackend(peer, path.join(dir, 'work-1')).upgradeControlPlane(upgrade({ first: false }, log)),
          (err: unknown) =>
            err instanceof KubernetesBackendError &&
            /^kubeadm upgrade node failed with exit code 3:\n.*never upgraded with kubeadm upgrade apply/.test(
              err.message,
            ),
        );
        assert.equal(await peer.nodeVersion(), undefined);
      });

      const refused: Array<[string, string, RegExp]> = [
        [
          'v1.32.0',
          'v1.31.2',
          /^Kubernetes cannot go from v1\.32\.0 down to v1\.31\.2: kubeadm does not downgrade a cluster\.$/,
        ],
        [
          'v1.31.2',
          'v1.33.0',
          /^Kubernetes cannot go from v1\.31\.2 to v1\.33\.0 in one upgrade: kubeadm upgrades one minor version at a time\.$/,
        ],
        ['v1.31.2', 'v1.32', /^"v1\.32" is not a Kubernetes version \(vMAJOR\.MINOR\.PATCH\)\.$/],
      ];
      for (const [from, version, message] of refused) {
        it(`refuses ${from} → ${version} before running kubeadm, naming both versions`, async () => {
          const { log } = collectingLogger();
          await assert.rejects(
            nodeBackend(standin, workDir).upgradeControlPlane(upgrade({ first: true, from, version }, log)),
            (err: unknown) => err instanceof UserError && message.test(err.message),
          );
          assert.deepEqual(await upgradeCalls(standin), []);
        });
      }

      it('a kubeadm older than the target refuses as kubeadm does; the error carries its words (the image must ship the new kubeadm)', async () => {
        const { log } = collectingLogger();
        const old = nodeBackend(standin, workDir, { ...standin.env, STANDIN_KUBEADM_VERSION: 'v1.31.9' });
        await assert.rejects(
          old.upgradeControlPlane(upgrade({ first: true }, log)),
          (err: unknown) =>
            err instanceof KubernetesBackendError &&
            /^kubeadm upgrade apply failed with exit code 3:[\s\S]*"v1\.32\.0" is higher than the kubeadm version "v1\.31\.9"/.test(
              err.message,
            ),
        );
        assert.deepEqual(
          await standin.cluster(),
          { version: 'v1.31.2', applied: false },
          'the cluster stays at its version',
        );
      });
    });

    it('says so when kubeadm is not installed', async () => {
      const { log } = collectingLogger();
      const emptyBin = path.join(dir, 'empty');
      await fs.mkdir(emptyBin);
      const missing = createBackend('kubeadm', {
        workDir,
        pkiDir: standin.pkiDir,
        manifestsDir: standin.manifestsDir,
        env: { PATH: emptyBin },
      });
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
