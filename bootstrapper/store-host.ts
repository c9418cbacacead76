/**
 * What a control-plane node does to host the cluster store (docs/design.md#cluster-store), whatever the store is: create it at init,
 * become part of it when it joins, start its part again after a reboot, and open a client for its join service.
 * Implementations: ./etcd-member.ts (`none` nodes: an etcd member per control plane). On `kubeadm` nodes the store is
 * the Kubernetes API, whose etcd kubeadm runs itself.
 */
import type { ClusterStore, StoreCredentials } from '../lib/cluster-store/types.js';
import type { ClusterPki } from '../lib/pki/cluster-pki.js';

export type { StoreCredentials };

export interface ClusterStoreHost {
  /**
   * The first control plane, at init: a new store with this node in it. Idempotent (a retried init). `alone`: the
   * provider knows of no other control plane (etcd: the member may start on short timeouts, ./etcd-member.ts).
   */
  create(pki: ClusterPki, options?: { alone?: boolean }): Promise<void>;
  /** A control plane that joined: become part of the store through the endpoints its ticket named. Idempotent. */
  join(pki: ClusterPki, endpoints: string[]): Promise<void>;
  /** Whether this node is part of the store already (it created or joined it before a reboot). */
  hosted(): Promise<boolean>;
  /** After a reboot (rejoin, recovery): start this node's part from its state disk; does not wait for a quorum. */
  resume(): Promise<void>;
  /** A client of the store for this node's join service (etcd: the join service's user, which cannot change the join configuration). */
  open(): Promise<ClusterStore>;
  /** A client with every right, for init's write of the join configuration (etcd: a short-lived admin certificate made in memory). */
  openAsAdmin(pki: ClusterPki): Promise<ClusterStore>;
  /** Credentials for the CLI, made at init. */
  adminCredentials(pki: ClusterPki): Promise<StoreCredentials>;
  /**
   * Optional: loads what create/join/resume will need (the store's client code) while the node waits for init or a
   * join service, so that the step does not wait for it.
   */
  preload?(): void;
  /**
   * Optional: called before this node's join service tells a control plane where to join the store (etcd: a member
   * init started alone leaves its short election timeouts first, ./etcd-member.ts).
   */
  beforePeerJoins?(): Promise<void>;
  /** Stops this node's part of the store. */
  close(): Promise<void>;
}
