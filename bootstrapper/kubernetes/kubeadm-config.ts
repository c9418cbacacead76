/**
 * kubeadm's configuration files (API kubeadm.k8s.io/v1beta4, Kubernetes 1.31+), generated from the bootstrapper's
 * parameters: InitConfiguration + ClusterConfiguration for `kubeadm init`, JoinConfiguration for `kubeadm join`,
 * as YAML documents in one file. Pure functions; ./kubeadm.ts writes and runs them.
 */
import { isIP } from 'node:net';
import { stringify } from 'yaml';
import { KubernetesBackendError, type InitParams, type JoinParams } from './types.js';

export const KUBEADM_API_VERSION = 'kubeadm.k8s.io/v1beta4';
const TOKEN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const CA_CERT_HASH = /^sha256:[0-9a-f]{64}$/;

export interface KubeletFiles {
  certFile: string;
  keyFile: string;
}

export function initConfiguration(p: Omit<InitParams, 'pkiFiles' | 'adminKubeconfig' | 'log'>, certificatesDir: string): string {
  checkIp(p.nodeIp);
  const endpoint = parseEndpoint(p.apiServerEndpoint);
  const init = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'InitConfiguration',
    localAPIEndpoint: { advertiseAddress: p.nodeIp, bindPort: endpoint.port },
    nodeRegistration: nodeRegistration(p.nodeName, p.nodeIp),
  };
  const cluster = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'ClusterConfiguration',
    clusterName: p.clusterName,
    kubernetesVersion: normalizeVersion(p.kubernetesVersion),
    controlPlaneEndpoint: p.apiServerEndpoint,
    certificatesDir,
    apiServer: { certSANs: [...new Set(p.certSANs)] },
    networking: { serviceSubnet: p.serviceCIDR, ...(p.podCIDR ? { podSubnet: p.podCIDR } : {}) },
  };
  return documents(init, cluster);
}

export function joinConfiguration(p: Omit<JoinParams, 'controlPlaneFiles' | 'kubeletCert' | 'kubeletKey' | 'log'>, kubelet?: KubeletFiles): string {
  checkIp(p.nodeIp);
  const endpoint = parseEndpoint(p.apiServerEndpoint);
  if (!TOKEN.test(p.token)) {
    throw new KubernetesBackendError('The bootstrap token the join service sent is not of the form [a-z0-9]{6}.[a-z0-9]{16}.');
  }
  if (!CA_CERT_HASH.test(p.discoveryTokenCaCertHash)) {
    throw new KubernetesBackendError(`The discovery hash "${p.discoveryTokenCaCertHash}" is not of the form sha256:<64 hex digits>.`);
  }
  const extraArgs = kubelet ? [{ name: 'tls-cert-file', value: kubelet.certFile }, { name: 'tls-private-key-file', value: kubelet.keyFile }] : [];
  const join = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'JoinConfiguration',
    discovery: {
      bootstrapToken: { apiServerEndpoint: p.apiServerEndpoint, token: p.token, caCertHashes: [p.discoveryTokenCaCertHash] },
    },
    nodeRegistration: nodeRegistration(p.nodeName, p.nodeIp, extraArgs),
    ...(p.isControlPlane ? { controlPlane: { localAPIEndpoint: { advertiseAddress: p.nodeIp, bindPort: endpoint.port } } } : {}),
  };
  return documents(join);
}

/** "1.31.2" and "v1.31.2" both become "v1.31.2", as kubeadm expects. */
export function normalizeVersion(version: string): string {
  const v = version.startsWith('v') ? version : `v${version}`;
  if (!/^v\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$/.test(v)) {
    throw new KubernetesBackendError(`"${version}" is not a Kubernetes version (vMAJOR.MINOR.PATCH).`);
  }
  return v;
}

/** host:port, [ipv6]:port. */
export function parseEndpoint(endpoint: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(endpoint);
  const port = match ? Number(match[3]) : 0;
  if (!match || port < 1 || port > 65535) {
    throw new KubernetesBackendError(`"${endpoint}" is not an API server endpoint of the form host:port.`);
  }
  return { host: match[1] ?? match[2]!, port };
}

function nodeRegistration(name: string, nodeIp: string, extra: { name: string; value: string }[] = []) {
  return { name, kubeletExtraArgs: [{ name: 'node-ip', value: nodeIp }, ...extra] };
}

function checkIp(ip: string): void {
  if (isIP(ip) === 0) throw new KubernetesBackendError(`"${ip}" is not the node's IP address.`);
}

function documents(...docs: object[]): string {
  return docs.map((doc) => stringify(doc)).join('---\n');
}
