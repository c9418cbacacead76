/**
 * kubeadm's configuration files (API kubeadm.k8s.io/v1beta4, which kubeadm reads from Kubernetes 1.31 on, so
 * older versions are refused), generated from the bootstrapper's parameters as upstream Constellation generates
 * them (bootstrapper/internal/kubernetes/k8sapi/kubeadm_config.go), as YAML documents in one file:
 *
 *   init: InitConfiguration    node name, IP, CRI socket, kubelet flags (node-ip; on cloud nodes
 *                              cloud-provider=external and provider-id)
 *         ClusterConfiguration endpoint, version, certificatesDir, certSANs (empty ones dropped), networking
 *                              (serviceSubnet, podSubnet), the API server verifying kubelets' serving
 *                              certificates (kubelet-certificate-authority), external cloud provider
 *         KubeletConfiguration cluster-wide (kubeadm uploads it for every node): the kubelet serving certificate
 *                              files every node has in the certificate directory
 *   join: JoinConfiguration    bootstrap-token discovery, node registration as above, control-plane endpoint
 *
 * Pure functions; ./kubeadm.ts writes and runs them.
 */
import { isIP } from 'node:net';
import path from 'node:path';
import { stringify } from 'yaml';
import { KubernetesBackendError, type InitParams, type JoinParams } from './types.js';

export const KUBEADM_API_VERSION = 'kubeadm.k8s.io/v1beta4';
export const KUBELET_API_VERSION = 'kubelet.config.k8s.io/v1beta1';
/** containerd's socket: set, so kubeadm does not have to detect the runtime (it refuses when it finds several). */
export const CRI_SOCKET = 'unix:///run/containerd/containerd.sock';
/** kubeadm reads v1beta4 from 1.31 on. */
export const MINIMUM_KUBERNETES = { major: 1, minor: 31 } as const;
/** The kubelet serving certificate and key, by these names in the certificate directory on every node. */
export const KUBELET_CERT_FILE = 'kubelet.crt';
export const KUBELET_KEY_FILE = 'kubelet.key';
const TOKEN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const CA_CERT_HASH = /^sha256:[0-9a-f]{64}$/;

type Arg = { name: string; value: string };

export function initConfiguration(
  p: Omit<InitParams, 'pkiFiles' | 'adminKubeconfig' | 'log'>,
  certificatesDir: string,
): string {
  checkIp(p.nodeIp);
  const kubernetesVersion = checkVersion(p.kubernetesVersion);
  const endpoint = parseEndpoint(p.apiServerEndpoint);
  const external = p.providerId !== undefined;
  const init = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'InitConfiguration',
    localAPIEndpoint: { advertiseAddress: p.nodeIp, bindPort: endpoint.port },
    nodeRegistration: nodeRegistration(p.nodeName, p.nodeIp, p.providerId),
  };
  const cluster = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'ClusterConfiguration',
    clusterName: p.clusterName,
    kubernetesVersion,
    controlPlaneEndpoint: p.apiServerEndpoint,
    certificatesDir,
    apiServer: {
      // 127.0.0.1 as upstream: the API server is reachable through localhost on the node.
      certSANs: certSans(['127.0.0.1', p.nodeIp, ...p.certSANs]),
      extraArgs: [
        // The API server verifies the kubelets' serving certificates against the cluster CA (logs, exec).
        { name: 'kubelet-certificate-authority', value: path.join(certificatesDir, 'ca.crt') },
        { name: 'profiling', value: 'false' },
      ],
    },
    controllerManager: {
      extraArgs: [
        ...(external ? [{ name: 'cloud-provider', value: 'external' }] : []),
        { name: 'configure-cloud-routes', value: 'false' },
        { name: 'profiling', value: 'false' },
      ],
    },
    scheduler: { extraArgs: [{ name: 'profiling', value: 'false' }] },
    networking: { serviceSubnet: p.serviceCIDR, ...(p.podCIDR ? { podSubnet: p.podCIDR } : {}) },
  };
  // Cluster-wide: kubeadm uploads it (kubelet-config ConfigMap) and every joining kubelet reads it.
  const kubelet = {
    apiVersion: KUBELET_API_VERSION,
    kind: 'KubeletConfiguration',
    tlsCertFile: path.join(certificatesDir, KUBELET_CERT_FILE),
    tlsPrivateKeyFile: path.join(certificatesDir, KUBELET_KEY_FILE),
    staticPodPath: '/etc/kubernetes/manifests',
  };
  return documents(init, cluster, kubelet);
}

export function joinConfiguration(
  p: Omit<JoinParams, 'controlPlaneFiles' | 'kubeletCert' | 'kubeletKey' | 'log'>,
): string {
  checkIp(p.nodeIp);
  checkVersion(p.kubernetesVersion);
  const endpoint = parseEndpoint(p.apiServerEndpoint);
  if (!TOKEN.test(p.token)) {
    throw new KubernetesBackendError(
      'The bootstrap token the join service sent is not of the form [a-z0-9]{6}.[a-z0-9]{16}.',
    );
  }
  if (!CA_CERT_HASH.test(p.discoveryTokenCaCertHash)) {
    throw new KubernetesBackendError(
      `The discovery hash "${p.discoveryTokenCaCertHash}" is not of the form sha256:<64 hex digits>.`,
    );
  }
  const join = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'JoinConfiguration',
    discovery: {
      bootstrapToken: {
        apiServerEndpoint: p.apiServerEndpoint,
        token: p.token,
        caCertHashes: [p.discoveryTokenCaCertHash],
      },
    },
    nodeRegistration: nodeRegistration(p.nodeName, p.nodeIp, p.providerId),
    ...(p.isControlPlane
      ? {
          controlPlane: { localAPIEndpoint: { advertiseAddress: p.nodeIp, bindPort: endpoint.port } },
          // The CA files come with the join ticket, not from kubeadm's uploaded-certs Secret (as upstream).
          skipPhases: ['control-plane-prepare/download-certs'],
        }
      : {}),
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

/** The normalized version, refused below 1.31: kubeadm reads the v1beta4 configuration from 1.31 on. */
export function checkVersion(version: string): string {
  const v = normalizeVersion(version);
  const [major, minor] = v.slice(1).split('.').map(Number) as [number, number];
  if (major < MINIMUM_KUBERNETES.major || (major === MINIMUM_KUBERNETES.major && minor < MINIMUM_KUBERNETES.minor)) {
    throw new KubernetesBackendError(
      `Kubernetes ${v} is too old for the kubeadm backend: its configuration (${KUBEADM_API_VERSION}) needs Kubernetes 1.31 or newer.`,
      {
        hint: 'Set kubernetesVersion in constellation-conf.yaml to v1.31 or newer.',
      },
    );
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

/** Without empty entries (kubeadm refuses an empty SAN) and duplicates, in order. */
export function certSans(sans: readonly string[]): string[] {
  return [...new Set(sans.map((s) => s.trim()).filter((s) => s !== ''))];
}

/** On cloud nodes (a provider id is known) the kubelet leaves node initialization to the cloud controller manager. */
function nodeRegistration(name: string, nodeIp: string, providerId: string | undefined) {
  const kubeletExtraArgs: Arg[] = [{ name: 'node-ip', value: nodeIp }];
  if (providerId !== undefined)
    kubeletExtraArgs.push({ name: 'cloud-provider', value: 'external' }, { name: 'provider-id', value: providerId });
  return { name, criSocket: CRI_SOCKET, kubeletExtraArgs };
}

function checkIp(ip: string): void {
  if (isIP(ip) === 0) throw new KubernetesBackendError(`"${ip}" is not the node's IP address.`);
}

function documents(...docs: object[]): string {
  return docs.map((doc) => stringify(doc)).join('---\n');
}
