/** What the node's roles (init server, join client, recovery server) share: who the node is and its state. */
import type { Issuer } from '../lib/attestation/types.js';
import type { Logger } from '../lib/logging/index.js';
import type { NodeRole } from '../providers/contract.js';
import type { NodeLock } from './node-lock.js';
import type { NodeSetup } from './node-setup.js';
import type { NodeStatusTracker } from './node-status.js';
import type { StateDisk } from './state-disk/types.js';

/** Who this node is (from the environment the launcher sets). */
export interface NodeIdentity {
  name: string;
  /** The node's address: every server binds to it, and peers reach it there. */
  ip: string;
  role: NodeRole;
  /** The cloud's id of the instance (NodeMetadata.self().providerId, e.g. aws:///us-east-2a/i-...): the kubelet's provider-id. */
  providerId?: string;
}

export interface NodeRoleOptions {
  node: NodeIdentity;
  issuer: Issuer;
  lock: NodeLock;
  status: NodeStatusTracker;
  setup: NodeSetup;
  stateDisk: StateDisk;
  logger: Logger;
  /** Longest wait for one message of a peer. */
  stepTimeoutMs?: number;
}
