/**
 * The names of the cluster store's entries (keys relative to the store's prefix), apart from their codec
 * (./codec.ts, which says what each holds): the node program's etcd member needs a name before it listens, and the
 * codec's zod schemas would be compiled with it (docs/workflows/node-images.md, "The node program's start in the
 * VM").
 */
export const ENTRY = {
  attestationConfig: 'join/attestation-config',
  cluster: 'join/cluster',
  measurementSalt: 'join/measurement-salt',
  masterSecret: 'join/master-secret',
  joinServiceKey: 'join/service-key',
  pki: (name: string) => `join/pki/${name}`,
  node: (name: string) => `nodes/${name}`,
  // UUIDs name disks case-insensitively (Kubernetes object names are lowercase): one entry per disk on every backend.
  disk: (uuid: string) => `disks/${uuid.toLowerCase()}`,
  kubernetesUpgrade: 'upgrades/kubernetes',
} as const;

export const JOIN_CONFIG_PREFIX = 'join/';
export const NODES_PREFIX = 'nodes/';
