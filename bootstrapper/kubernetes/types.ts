/**
 * What the bootstrapper asks of Kubernetes (docs/design.md#kubernetes-backends): initialize the cluster on the first node, join every other
 * node, register the bootstrap tokens the node's join service hands out, and upgrade a control plane's Kubernetes
 * in place (docs/design.md#upgrades: the first control plane upgrades the cluster, each other one then follows). Backends: ./none.ts (local process
 * nodes, no Kubernetes) and ./kubeadm.ts (node images with kubeadm). The cluster PKI and the join material come
 * from our own code (lib/pki, the join service), so both backends get the same inputs.
 */
import { UserError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logging/index.js';
import type { TokenSink } from '../../joinservice/bootstrap-token.js';
import type { Clock } from '../../lib/clock.js';
import type { Exec } from './exec.js';
import type { CloudControllerValues } from '../../providers/contract.js';

export type BackendName = 'none' | 'kubeadm';

/** Where kubeadm keeps the cluster's PKI and the admin kubeconfig (here so that users need not load the backend). */
export const DEFAULT_PKI_DIR = '/etc/kubernetes/pki';
export const DEFAULT_ADMIN_CONF = '/etc/kubernetes/admin.conf';
export const BACKEND_NAMES: readonly BackendName[] = ['none', 'kubeadm'];

export interface InitParams {
  nodeName: string;
  nodeIp: string;
  clusterName: string;
  kubernetesVersion: string;
  /** host:port clients use for the API server (the load balancer). */
  apiServerEndpoint: string;
  certSANs: string[];
  serviceCIDR: string;
  /** The pod network (kubeadm's podSubnet: the controller manager cuts each node's pod CIDR from it). */
  podCIDR?: string;
  /** The nodes' network (the network plugin's WireGuard strict mode covers it). */
  nodeCIDR?: string;
  /** The cloud's instance id (a cloud node): the kubelet runs with cloud-provider=external and this provider-id. */
  providerId?: string;
  /** The cluster PKI by kubeadm's file names (ca.crt, ca.key, front-proxy-ca.*, etcd/ca.*, sa.key, sa.pub). */
  pkiFiles: Record<string, Uint8Array>;
  /** The admin kubeconfig made by lib/pki. */
  adminKubeconfig: Uint8Array;
  log: Logger;
}

export interface JoinParams {
  nodeName: string;
  nodeIp: string;
  apiServerEndpoint: string;
  /** Bootstrap token "abcdef.0123456789abcdef": a secret, never logged. */
  token: string;
  /** "sha256:<hex>" of the cluster CA's SubjectPublicKeyInfo. */
  discoveryTokenCaCertHash: string;
  /** The kubelet certificate the join service signed from the node's CSR (PEM)... */
  kubeletCert?: Uint8Array;
  /** ...and the private key of that CSR (PEM); the certificate is installed only with its key. */
  kubeletKey?: Uint8Array;
  isControlPlane: boolean;
  /** For control-plane nodes: the cluster CA files by kubeadm's names. */
  controlPlaneFiles: Record<string, Uint8Array>;
  kubernetesVersion: string;
  /** As InitParams.providerId. */
  providerId?: string;
  log: Logger;
}

export interface ControlPlaneUpgradeParams {
  nodeName: string;
  /** The version to go to ("v1.32.10"), and the one this node runs now. */
  version: string;
  from: string;
  /**
   * The control plane that upgrades the cluster (kubeadm upgrade apply: its ClusterConfiguration, the control-plane
   * static Pods, the add-ons); false on every other control plane (kubeadm upgrade node), only after the first's is done.
   */
  first: boolean;
  log: Logger;
}

export interface KubernetesBackend {
  readonly name: BackendName;
  init(p: InitParams): Promise<{ kubeconfig: Uint8Array; message: string }>;
  join(p: JoinParams): Promise<{ message: string }>;
  /**
   * Where this node's join service registers each bootstrap token before a ticket carries it, so the API server
   * accepts the token when the joining node presents it. A register that fails refuses that join.
   */
  tokenSink(log: Logger): TokenSink;
  /**
   * Upgrades this control plane's Kubernetes in place. Refuses (before running anything) what kubeadm refuses: a
   * downgrade, or more than one minor version. Safe to run again after a failure or a crash part-way.
   */
  upgradeControlPlane(p: ControlPlaneUpgradeParams): Promise<{ message: string }>;
}

export interface BackendOptions {
  /** Where a backend keeps its own files (generated configs, records). */
  workDir: string;
  /** Runs kubeadm; default: child_process with the PATH of `env`. */
  exec?: Exec;
  /** Where the cluster PKI goes (kubeadm's certificatesDir); default /etc/kubernetes/pki. */
  pkiDir?: string;
  /** Where kubeadm writes the admin kubeconfig (and reads it to register tokens); default /etc/kubernetes/admin.conf. */
  adminConfPath?: string;
  /** The environment kubeadm and kubectl run with (PATH finds them); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** kubelet's static Pod directory, emptied before every init and join (a retry after a failure); default /etc/kubernetes/manifests. */
  manifestsDir?: string;
  /** Whether this kernel has WireGuard (Cilium encrypts node-to-node traffic with it); default: read /sys/module and the module lists. */
  hasWireGuard?: () => Promise<boolean>;
  /**
   * Cloud nodes: the cloud's values for the cloud controller manager (NodePlatform.cloudController), installed after
   * the network plugin when the node has a provider id (./cloud-controller.ts).
   */
  cloudController?: () => Promise<CloudControllerValues>;
  /** Signs the first control-plane node's kubelet serving certificate; default the system clock. */
  clock?: Clock;
}

/** Kubernetes could not be set up; the message says which step failed and (redacted) why. */
export class KubernetesBackendError extends UserError {}
