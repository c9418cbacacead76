/**
 * The bootstrapper's environment: who the node is and where its TPM, state disk and folder are. The local
 * provider's launcher sets these (NODE_NAME, NODE_IP, NODE_ROLE, METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR,
 * NODE_DIR); a missing or malformed one is a UserError naming the variable, never a stack trace.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
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

const nonEmpty = (what: string) =>
  z.string({ error: `is not set; it must be ${what}` }).min(1, `is empty; it must be ${what}`);

const envSchema = z.object({
  NODE_NAME: nonEmpty('the node name').regex(
    /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/,
    'must be a node name (lowercase letters, digits, "-" and ".")',
  ),
  NODE_IP: nonEmpty("the node's IP address").refine((v) => isIP(v) !== 0, 'must be an IP address'),
  NODE_ROLE: z.enum(['control-plane', 'worker'], { error: 'must be "control-plane" or "worker"' }),
  METADATA_URL: nonEmpty('the metadata server URL').refine((v) => /^https?:\/\/\S+$/.test(v), 'must be an http(s) URL'),
  TPM_SOCKET: nonEmpty('the path of the TPM socket'),
  STATE_DISK: nonEmpty('the path of the state disk'),
  STATE_DIR: nonEmpty('the directory where the state disk is mounted'),
  NODE_DIR: nonEmpty("the node's folder"),
  CONSTELLATION_PROVIDER: z.string().min(1).default('local'),
  KUBERNETES_BACKEND: z.enum(['none', 'kubeadm'], { error: 'must be "none" or "kubeadm"' }).default('none'),
  IMAGE_VERSION: z.string().min(1).default('local'),
});

export function readNodeEnv(env: NodeJS.ProcessEnv = process.env): NodeEnv {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
    throw new UserError(`The bootstrapper's environment is incomplete: ${problems.join('; ')}.`, {
      hint: 'The node launcher sets NODE_NAME, NODE_IP, NODE_ROLE, METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR and NODE_DIR; set them when running the bootstrapper by hand.',
    });
  }
  const e = parsed.data;
  return {
    name: e.NODE_NAME,
    ip: e.NODE_IP,
    role: e.NODE_ROLE,
    metadataUrl: e.METADATA_URL,
    tpmSocket: e.TPM_SOCKET,
    stateDisk: e.STATE_DISK,
    stateDir: e.STATE_DIR,
    nodeDir: e.NODE_DIR,
    provider: e.CONSTELLATION_PROVIDER,
    backend: e.KUBERNETES_BACKEND,
    imageVersion: e.IMAGE_VERSION,
  };
}
