/**
 * The generated kubeadm configuration against strict schemas of kubeadm v1beta4 (./kubeadm-v1beta4.ts, written from
 * the official API reference): every document parses, and a misspelled field is refused, so the test fails on a
 * field name kubeadm does not know. Also the pieces of the network plugin that need no kubeadm: the Cilium
 * manifest's placeholders and the WireGuard check.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { certSans, initConfiguration, joinConfiguration } from '../../../bootstrapper/kubernetes/kubeadm-config.js';
import {
  ciliumManifestPath,
  kernelHasWireGuard,
  PLACEHOLDERS,
  renderCilium,
} from '../../../bootstrapper/kubernetes/network-plugin.js';
import { KubernetesBackendError } from '../../../bootstrapper/kubernetes/types.js';
import {
  clusterConfigurationSchema,
  initConfigurationSchema,
  joinConfigurationSchema,
  kubeletConfigurationSchema,
} from './kubeadm-v1beta4.js';

const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as Record<string, unknown>);
const SCHEMAS = {
  InitConfiguration: initConfigurationSchema,
  ClusterConfiguration: clusterConfigurationSchema,
  JoinConfiguration: joinConfigurationSchema,
  KubeletConfiguration: kubeletConfigurationSchema,
};
const check = (doc: Record<string, unknown>) => SCHEMAS[doc.kind as keyof typeof SCHEMAS].parse(doc);

const init = (over: object = {}) =>
  initConfiguration(
    {
      nodeName: 'cp-0',
      nodeIp: '10.9.0.10',
      clusterName: 'demo',
      kubernetesVersion: '1.31.2',
      apiServerEndpoint: '34.1.2.3:6443',
      certSANs: ['34.1.2.3', ''],
      serviceCIDR: '10.96.0.0/12',
      podCIDR: '10.244.0.0/16',
      providerId: 'aws:///us-east-2a/i-0abc',
      ...over,
    },
    '/etc/kubernetes/pki',
  );
const join = (over: object = {}) =>
  joinConfiguration({
    nodeName: 'wk-0',
    nodeIp: '10.9.0.20',
    apiServerEndpoint: '34.1.2.3:6443',
    token: 'abcdef.0123456789abcdef',
    discoveryTokenCaCertHash: `sha256:${'a'.repeat(64)}`,
    isControlPlane: true,
    kubernetesVersion: 'v1.31.2',
    providerId: 'aws:///us-east-2a/i-0def',
    ...over,
  });

describe('kubeadm configuration (v1beta4 field names)', () => {
  it('init: Init-, Cluster- and KubeletConfiguration use only v1beta4 / kubelet v1beta1 fields', () => {
    const parsed = docs(init());
    assert.deepEqual(
      parsed.map((d) => d.kind),
      ['InitConfiguration', 'ClusterConfiguration', 'KubeletConfiguration'],
    );
    for (const doc of parsed) check(doc);
  });

  it('join (control plane and worker): JoinConfiguration uses only v1beta4 fields', () => {
    for (const yaml of [join(), join({ isControlPlane: false, providerId: undefined })])
      for (const doc of docs(yaml)) check(doc);
  });

  it('the schemas refuse a misspelled field, so a typo in the generator fails this test', () => {
    const [initDoc, cluster, kubelet] = docs(init());
    const misspell = (doc: Record<string, unknown>, at: string[], from: string, to: string) => {
      const copy = structuredClone(doc);
      const parent = at.reduce<Record<string, unknown>>((o, k) => o[k] as Record<string, unknown>, copy);
      parent[to] = parent[from];
      delete parent[from];
      return copy;
    };
    assert.throws(() => check(misspell(initDoc!, ['nodeRegistration'], 'criSocket', 'criSock')), /criSock/);
    assert.throws(() => check(misspell(cluster!, ['networking'], 'podSubnet', 'podCIDR')), /podCIDR/);
    assert.throws(() => check(misspell(cluster!, ['apiServer'], 'certSANs', 'certSans')), /certSans/);
    assert.throws(() => check(misspell(kubelet!, [], 'tlsCertFile', 'tlsCertificateFile')));
    // v1beta3's map form of extra arguments is not v1beta4's list of name/value pairs.
    assert.throws(() => check({ ...initDoc!, nodeRegistration: { kubeletExtraArgs: { 'node-ip': '10.9.0.10' } } }));
  });

  it('drops empty and duplicate SANs', () => {
    assert.deepEqual(certSans(['a', '', ' ', 'b', 'a', ' c ']), ['a', 'b', 'c']);
  });
});

describe('Cilium manifest', () => {
  it('carries every placeholder, and rendering leaves none', async () => {
    const template = await fs.readFile(ciliumManifestPath(), 'utf8');
    const out = renderCilium(template, { apiServerHost: 'lb.example.com', podCIDR: '10.10.0.0/16', wireGuard: true });
    for (const placeholder of Object.values(PLACEHOLDERS)) assert.ok(!out.includes(placeholder), placeholder);
    assert.match(out, /encryption-strict-mode-node-cidrs: ""/, 'no node network: strict mode covers the pods only');
    assert.match(out, /"nonMasqueradeCIDRs":\[\]/);
    assert.throws(
      () => renderCilium('kind: ConfigMap\n', { apiServerHost: 'x', podCIDR: 'y', wireGuard: true }),
      KubernetesBackendError,
    );
  });

  it('finds WireGuard loaded, built in or as a module, and not otherwise', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'wg-'));
    try {
      const modules = path.join(root, 'lib/modules', os.release());
      await fs.mkdir(modules, { recursive: true });
      await fs.writeFile(path.join(modules, 'modules.dep'), 'kernel/drivers/net/veth.ko:\n');
      assert.equal(await kernelHasWireGuard(root), false);
      await fs.writeFile(
        path.join(modules, 'modules.dep'),
        'kernel/drivers/net/wireguard/wireguard.ko.xz: kernel/lib/crypto/libchacha20poly1305.ko.xz\n',
      );
      assert.equal(await kernelHasWireGuard(root), true);
      await fs.rm(path.join(modules, 'modules.dep'));
      await fs.mkdir(path.join(root, 'sys/module/wireguard'), { recursive: true });
      assert.equal(await kernelHasWireGuard(root), true);
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});
