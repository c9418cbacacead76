/**
 * The bootstrapper's environment: who the node is and where its TPM, state disk and folder are. The local
 * provider's launcher sets these (NODE_NAME, NODE_IP, NODE_ROLE, METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR,
 * NODE_DIR); a missing or malformed one is a UserError naming the variable, never a stack trace.
 */
import { isIP } from 'node:net';
import { UserError } from '../../lib/errors.js';
import type { NodeRole } from '../contract.js';

export interface NodeEnv {
  name: string;
  ip: string;
  role: NodeRole;
  metadataUrl: string;
  tpmSocket: string;
  /** The state disk (local nodes: the folder of the gocryptfs disk). */
  stateDisk: string;
  /** Where the unlocked state disk is mounted. */
  stateDir: string;
  nodeDir: string;
  /** Provider whose node metadata this node asks (CONSTELLATION_PROVIDER, default "local"). */
  provider: string;
  /** Kubernetes backend (KUBERNETES_BACKEND, default "none"). */
  backend: 'none' | 'kubeadm';
  /** The image's version (IMAGE_VERSION, default "local"), reported by `constellation status`. */
  imageVersion: string;
}

/** The variables the launcher sets, each with what it must be (in the error when it is missing or empty). */
const REQUIRED = {
  NODE_NAME: 'the node name',
  NODE_IP: "the node's IP address",
  NODE_ROLE: 'the node role',
  METADATA_URL: 'the metadata server URL',
  TPM_SOCKET: 'the path of the TPM socket',
  STATE_DISK: 'the path of the state disk',
  STATE_DIR: 'the directory where the state disk is mounted',
  NODE_DIR: "the node's folder",
} as const;

/** What else a set variable must satisfy: the problem, or undefined. */
const FORMATS: Partial<Record<keyof typeof REQUIRED, (v: string) => string | undefined>> = {
  NODE_NAME: (v) =>
    /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(v)
      ? undefined
      : 'must be a node name (lowercase letters, digits, "-" and ".")',
  NODE_IP: (v) => (isIP(v) !== 0 ? undefined : 'must be an IP address'),
  NODE_ROLE: (v) => (v === 'control-plane' || v === 'worker' ? undefined : 'must be "control-plane" or "worker"'),
  METADATA_URL: (v) => (/^https?:\/\/\S+$/.test(v) ? undefined : 'must be an http(s) URL'),
};

/**
 * Checked by hand, not with a schema library: this runs in every local node's start, where zod (its chunk's compile,
 * its initialization and the schema's construction: about 80 ms of CPU per worker in a 1+9 `mini up`) was the one
 * load of zod on a worker's way to joining (docs/workflows/mini.md, "Less to load at each node's start").
 */
export function readNodeEnv(env: NodeJS.ProcessEnv = process.env): NodeEnv {
  const problems: string[] = [];
  const value = {} as Record<keyof typeof REQUIRED, string>;
  for (const [name, what] of Object.entries(REQUIRED) as [keyof typeof REQUIRED, string][]) {
    const v = env[name];
    const problem =
      v === undefined
        ? `is not set; it must be ${what}`
        : v === ''
          ? `is empty; it must be ${what}`
          : FORMATS[name]?.(v);
    if (problem) problems.push(`${name} ${problem}`);
    else value[name] = v as string;
  }
  const backend = env.KUBERNETES_BACKEND || 'none';
  if (backend !== 'none' && backend !== 'kubeadm') problems.push('KUBERNETES_BACKEND must be "none" or "kubeadm"');
  if (problems.length > 0) {
    throw new UserError(`The bootstrapper's environment is incomplete: ${problems.join('; ')}.`, {
      hint: 'The node launcher sets NODE_NAME, NODE_IP, NODE_ROLE, METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR and NODE_DIR; set them when running the bootstrapper by hand.',
    });
  }
  return {
    name: value.NODE_NAME,
    ip: value.NODE_IP,
    role: value.NODE_ROLE as NodeRole,
    metadataUrl: value.METADATA_URL,
    tpmSocket: value.TPM_SOCKET,
    stateDisk: value.STATE_DISK,
    stateDir: value.STATE_DIR,
    nodeDir: value.NODE_DIR,
    provider: env.CONSTELLATION_PROVIDER || 'local',
    backend: backend as NodeEnv['backend'],
    imageVersion: env.IMAGE_VERSION || 'local',
  };
}
