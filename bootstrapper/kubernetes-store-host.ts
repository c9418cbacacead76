/**
 * The cluster store of `kubeadm` nodes (docs/design.md#cluster-store): the Kubernetes API (lib/cluster-store/kubernetes.ts), whose
 * etcd kubeadm runs on every control plane: `kubeadm init` creates it, `kubeadm join --control-plane` adds the
 * node's member, kubelet starts it again after a reboot. So there is nothing to create, join or resume here; a
 * control plane takes part through its admin kubeconfig (which kubeadm writes on control-plane nodes), and its
 * join service reads the store with it. The CLI reaches the store with the cluster's admin kubeconfig
 * (constellation-admin.conf), which it has already: its credentials are only the name of the backend.
 */
import { promises as fs } from 'node:fs';
import type { ClusterStore } from '../lib/cluster-store/types.js';
import { UserError } from '../lib/errors.js';
import { DEFAULT_ADMIN_CONF } from './kubernetes/types.js';
import type { ClusterStoreHost, StoreCredentials } from './store-host.js';

export interface KubernetesStoreHostOptions {
  /** The node's admin kubeconfig, as kubeadm writes it (BackendOptions.adminConfPath); default /etc/kubernetes/admin.conf. */
  adminConfPath?: string;
  /** Deadline of one API request; default the store's (3 s). */
  timeoutMs?: number;
}

export class KubernetesStoreHost implements ClusterStoreHost {
  private readonly adminConfPath: string;

  constructor(private readonly options: KubernetesStoreHostOptions = {}) {
    this.adminConfPath = options.adminConfPath ?? DEFAULT_ADMIN_CONF;
  }

  /** kubeadm init created the store's etcd (init runs the Kubernetes backend before it creates the store). */
  async create(): Promise<void> {}

  /** kubeadm join --control-plane added this node's etcd member; the ticket names no store endpoints for kubeadm. */
  async join(): Promise<void> {}

  async hosted(): Promise<boolean> {
    return fs.access(this.adminConfPath).then(
      () => true,
      () => false,
    );
  }

  /** kubelet restarts the static Pods (etcd, the API server) by itself. */
  async resume(): Promise<void> {}

  async open(): Promise<ClusterStore> {
    if (!(await this.hosted())) {
      throw new UserError(
        `This node has no admin kubeconfig at ${this.adminConfPath}, so its join service cannot read the cluster store (the Kubernetes API).`,
        {
          hint: "kubeadm writes it on control-plane nodes (kubeadm init, kubeadm join --control-plane); see the node log for kubeadm's output.",
        },
      );
    }
    // Loaded here, not at start: with its codec's zod schemas it would be compiled before the node program listens.
    const { KubernetesClusterStore } = await import('../lib/cluster-store/kubernetes.js');
    return KubernetesClusterStore.connect({
      kubeconfig: { path: this.adminConfPath },
      timeoutMs: this.options.timeoutMs,
    });
  }

  /** The join service's client is the admin kubeconfig already. */
  openAsAdmin(): Promise<ClusterStore> {
    return this.open();
  }

  async adminCredentials(): Promise<StoreCredentials> {
    return { backend: 'kubernetes' };
  }

  /** Nothing of the store runs in this process. */
  async close(): Promise<void> {}
}
