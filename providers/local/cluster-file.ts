/**
 * The local provider's cluster file, cluster.json in the workspace: its own record of a cluster (uid, network id and
 * address prefix, node groups, nodes with their addresses, AKs and PIDs), so status, scaling, reboot and terminate
 * work from any later CLI process. It is not the cluster store (lib/cluster-store/, which the nodes keep in etcd or
 * Kubernetes); it lives on the CLI's machine and only the local and qemu providers read it.
 * One ClusterFile per CLI operation holds it in memory; changes are written atomically, one after another, so
 * nodes started in parallel never lose each other's updates.
 */
import { z } from 'zod';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { UserError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { ClusterPaths } from './layout.js';
import { isNetworkId } from './network.js';

const pid = z.number().int().positive();

const nodeRecordSchema = z.object({
  group: z.string(),
  role: z.enum(['control-plane', 'worker']),
  /** Host number in the cluster's /24 (the address is <prefix>.<host>). */
  host: z.number().int().min(2).max(254),
  /** The image the node boots: `local` (the current build) or a version of the user's images; unset: `local`. */
  image: z.string().optional(),
  /** TPMT_PUBLIC of the node's AK, base64; set once, before the node first boots. */
  akPublic: z.string().optional(),
  swtpmPid: pid.optional(),
  launcherPid: pid.optional(),
  /** Out of the load balancer (drainInstance): about to be removed. */
  drained: z.boolean().optional(),
  /** When the provider made the node (ISO 8601); missing in records of earlier versions. */
  createdAt: z.string().optional(),
});
export type LocalNodeRecord = z.infer<typeof nodeRecordSchema>;

const clusterRecordSchema = z.object({
  version: z.literal(1),
  uid: z.string(),
  name: z.string(),
  /**
   * The id in the names of the cluster's network namespaces (./network.ts), made with the record, before any
   * namespace exists. Missing only in records of earlier versions, whose nodes had loopback addresses.
   */
  netId: z.string().refine(isNetworkId, 'must be 12 hex digits').optional(),
  /** The cluster's /24 ("10.213.N"); set once the cluster holds it (./network.ts, claimRange). */
  prefix: z.string().optional(),
  metadataPort: z.number().int(),
  cloudPid: pid.optional(),
  initSecretHash: z.string(),
  /** The join-service identity key (public, base64) the nodes check tickets against; empty in records of earlier versions. */
  joinServiceKey: z.string().default(''),
  /** Set once `init` succeeded: from then on the metadata serves no init-secret hash, so no node added later serves Init. */
  initialized: z.boolean().default(false),
  /** The config's provider.local.kubernetesBackend, handed to every node. */
  kubernetesBackend: z.enum(['none', 'kubeadm']).default('none'),
  nodeGroups: z.record(
    z.string(),
    z.object({
      role: z.enum(['control-plane', 'worker']),
      stateDiskSizeGB: z.number().positive(),
      count: z.number().int().min(0),
    }),
  ),
  /** Next index per role for node names (control-plane-<i>, worker-<i>); names are never reused. */
  nextNodeIndex: z.record(z.string(), z.number().int().min(0)),
  nodes: z.record(z.string(), nodeRecordSchema),
});
export type LocalClusterRecord = z.infer<typeof clusterRecordSchema>;

export class ClusterFile {
  private queue: Promise<unknown> = Promise.resolve();
  /** The write that has not started yet (it will write every change made so far); undefined when none waits. */
  private waitingWrite: Promise<void> | undefined;

  private constructor(
    readonly paths: ClusterPaths,
    readonly record: LocalClusterRecord,
  ) {}

  /** The recorded cluster, or undefined when this workspace has none. */
  static async load(paths: ClusterPaths): Promise<ClusterFile | undefined> {
    let text: string;
    try {
      text = (
        await readRegularFile(paths.clusterFile, { what: 'the local cluster record', maxBytes: SIZE_LIMITS.nodeFile })
      ).toString('utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    let parsed;
    try {
      parsed = clusterRecordSchema.safeParse(JSON.parse(text));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      const where = parsed
        ? ` at ${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`
        : ' (not JSON)';
      throw new UserError(`The local cluster record ${paths.clusterFile} is invalid${where}.`, {
        hint: 'Restore it from a backup, or run `constellation terminate` to remove the local cluster it described.',
      });
    }
    return new ClusterFile(paths, parsed.data);
  }

  static async create(paths: ClusterPaths, record: LocalClusterRecord): Promise<ClusterFile> {
    const file = new ClusterFile(paths, clusterRecordSchema.parse(record));
    await file.update(() => {});
    return file;
  }

  /**
   * Changes the record and writes it; resolves when this change (and every earlier one) is on disk. Changes made
   * while a write waits for its turn share that write: it writes the record as it is when it starts (the nodes of a
   * create each update it twice; one fsynced write each was a queue of twenty).
   */
  update(change: (record: LocalClusterRecord) => void): Promise<void> {
    change(this.record);
    if (this.waitingWrite) return this.waitingWrite;
    const write = () => {
      this.waitingWrite = undefined; // what changes from now on needs another write
      return writeFileAtomic(this.paths.clusterFile, `${JSON.stringify(this.record, null, 2)}\n`, { mode: 0o600 });
    };
    const run = this.queue.then(write, write);
    this.waitingWrite = run;
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/**
 * What the metadata server tells nodes about the cluster: the init-secret hash only until the cluster is
 * initialized (so that no node added later serves Init), and the join-service key.
 */
export function clusterSettings(record: LocalClusterRecord): { initSecretHash: string; joinServiceKey: string } {
  return { initSecretHash: record.initialized ? '' : record.initSecretHash, joinServiceKey: record.joinServiceKey };
}
