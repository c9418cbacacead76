/**
 * The collaborators the bootstrapper takes (everything with a side effect is a parameter, so tests run the
 * whole daemon in-process with a real swtpm, real sockets and fakes where a provider or Kubernetes would be).
 * The state disk and the Kubernetes backend are other modules' interfaces; re-exported here so the rest of
 * the bootstrapper names them in one place.
 */
import type { Issuer, ValidatorDeps } from '../lib/attestation/types.js';
import type { Logger } from '../lib/logging/index.js';
import type { TpmClient } from '../lib/tpm/client.js';
import type { ValidatorFactory } from '../joinservice/server.js';
import type { TokenSink } from '../joinservice/bootstrap-token.js';
import type { NodeRole } from '../providers/contract.js';
import type { NodeLock } from './node-lock.js';
import type { NodeSetup } from './node-setup.js';
import type { NodeStatusTracker } from './node-status.js';
import type { StateDisk } from './state-disk/types.js';

export type { StateDisk };
export type { InitParams, JoinParams, KubernetesBackend } from './kubernetes/backend.js';

/** Who this node is (from the environment the launcher sets). */
export interface NodeIdentity {
  name: string;
  /** The node's address: every server binds to it, and peers reach it there. */
  ip: string;
  role: NodeRole;
}

/** What the node's roles (init server, join client, recovery server) share: who the node is and its state. */
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

/** The TPM operations the bootstrapper needs besides the issuer's (which shares the same connection). */
export type BootstrapperTpm = Pick<TpmClient, 'pcrExtend' | 'pcrBanks'>;

/** Ports of the node's services (DESIGN §6); tests pass 0 for ephemeral ports where nothing else must find them. */
export interface ServicePorts {
  init: number;
  verify: number;
  /** Where this node's join service listens AND where the join client looks for other nodes' join services. */
  join: number;
  recovery: number;
}

export const DEFAULT_PORTS: ServicePorts = { init: 9000, verify: 30081, join: 30090, recovery: 9999 };

/** What a join service started on this node (after init, or on a control-plane node after joining) needs. */
export interface JoinServiceSettings {
  /** Directory of the join service's files (NODE_DIR/joinservice). */
  dir: string;
  /** The provider's attestation collaborators (local: the AK registry). */
  validatorDeps: ValidatorDeps;
  /** Default: lib/attestation/registry's createValidator. */
  createValidator?: ValidatorFactory;
  /** Where bootstrap tokens are registered; default: the Kubernetes backend's sink (kubeadm: the API server; none: memory). */
  tokenSink?: TokenSink;
}

export type Clock = () => Date;
export type { Logger };
