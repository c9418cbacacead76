/**
 * A cluster store in memory, with the same entries and checks as the real backends (./codec.ts): for unit tests
 * of the join service and of the CLI's store commands. `available = false` plays a store without quorum.
 */
import {
  decodeJoinConfig,
  decodeKubernetesUpgrade,
  decodeNode,
  encodeJoinConfig,
  encodeKubernetesUpgrade,
  encodeNode,
  ENTRY,
  JOIN_CONFIG_PREFIX,
  NODES_PREFIX,
} from './codec.js';
import {
  StoreUnavailableError,
  type ClusterStore,
  type JoinConfig,
  type KubernetesUpgrade,
  type NodeRecord,
} from './types.js';

export class MemoryClusterStore implements ClusterStore {
  readonly backend = 'memory' as const;
  readonly entries = new Map<string, string>();
  /** Grows with every write. */
  private revision = 0;
  available = true;

  async readJoinConfig(): Promise<{ config: JoinConfig; revision: string }> {
    this.check();
    const join = new Map([...this.entries].filter(([key]) => key.startsWith(JOIN_CONFIG_PREFIX)));
    return { config: decodeJoinConfig(join, 'the memory store'), revision: String(this.revision) };
  }

  async writeJoinConfig(parts: Partial<JoinConfig>): Promise<void> {
    this.check();
    for (const [key, value] of encodeJoinConfig(parts)) this.entries.set(key, value);
    this.revision++;
  }

  async claimDisk(diskUuid: string, instance: string): Promise<string> {
    this.check();
    const key = ENTRY.disk(diskUuid);
    if (!this.entries.has(key)) {
      this.entries.set(key, instance);
      this.revision++;
    }
    return this.entries.get(key)!;
  }

  async putNode(record: NodeRecord): Promise<void> {
    this.check();
    this.entries.set(ENTRY.node(record.name), encodeNode(record));
    this.revision++;
  }

  async getNode(name: string): Promise<NodeRecord | undefined> {
    this.check();
    const text = this.entries.get(ENTRY.node(name));
    return text === undefined ? undefined : decodeNode(text, ENTRY.node(name));
  }

  async listNodes(): Promise<NodeRecord[]> {
    this.check();
    return [...this.entries]
      .filter(([key]) => key.startsWith(NODES_PREFIX))
      .map(([key, value]) => decodeNode(value, key));
  }

  async deleteNode(name: string): Promise<void> {
    this.check();
    this.entries.delete(ENTRY.node(name));
    this.revision++;
  }

  /** The store's revision when the Kubernetes upgrade record was last written. */
  private upgradeRevision = 0;

  async readKubernetesUpgrade(): Promise<{ upgrade: KubernetesUpgrade; revision: string } | undefined> {
    this.check();
    const text = this.entries.get(ENTRY.kubernetesUpgrade);
    return text === undefined
      ? undefined
      : { upgrade: decodeKubernetesUpgrade(text, ENTRY.kubernetesUpgrade), revision: String(this.upgradeRevision) };
  }

  async swapKubernetesUpgrade(upgrade: KubernetesUpgrade, revision: string | undefined): Promise<boolean> {
    this.check();
    const exists = this.entries.has(ENTRY.kubernetesUpgrade);
    if (revision === undefined ? exists : !exists || revision !== String(this.upgradeRevision)) return false;
    this.entries.set(ENTRY.kubernetesUpgrade, encodeKubernetesUpgrade(upgrade));
    this.upgradeRevision = ++this.revision;
    return true;
  }

  /** What memberEndpoints() answers. */
  endpoints: string[] = [];

  async memberEndpoints(): Promise<string[]> {
    this.check();
    return this.endpoints;
  }

  async close(): Promise<void> {}

  private check(): void {
    if (!this.available) throw new StoreUnavailableError('the memory store is set unavailable');
  }
}
