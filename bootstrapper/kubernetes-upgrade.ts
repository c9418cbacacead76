/**
 * The in-place Kubernetes upgrade of the control planes (docs/design.md#upgrades), the node's side. It runs on every control
 * plane once the node is in the cluster, and follows the upgrade record in the cluster store
 * (lib/cluster-store/types.ts KubernetesUpgrade), which the CLI's `upgrade apply` writes:
 *
 *   the record asks for a version this node does not run
 *     ├─ nobody claimed the cluster-wide step: claim it (compare-and-swap of `first`: one control plane wins)
 *     ├─ this node is first and has not applied: backend upgrade, first (kubeadm upgrade apply) → keep → `applied`
 *     ├─ another node is first and has applied: backend upgrade (kubeadm upgrade node) → keep
 *     └─ another node is first and has not applied: wait for it
 *   keep = the version goes to the node's cluster record on its state disk (a reboot or rejoin reports it) and to
 *          its status (`constellation status`); then the node's entry in the record says `upgraded`
 *   a failure is logged in full and its reason goes to the node's entry (`failed`), so the CLI can show it; it is
 *   not tried again until the CLI asks again (its next run clears the failures)
 *
 * A node that runs the record's version already (it crashed after upgrading, or it joined at that version) only
 * makes the record say so. Every write of the record is a compare-and-swap, read again and retried when another
 * control plane wrote in between. `step()` is one pass; `start()` repeats it every poll interval until `close()`.
 */
import type { ClusterStore, KubernetesUpgrade } from '../lib/cluster-store/types.js';
import { realSleep, type Clock, type Sleep } from '../lib/clock.js';
import type { Logger } from '../lib/logging/index.js';
import { describeError } from './errors.js';
import type { KubernetesBackend } from './kubernetes/backend.js';
import type { NodeStatusTracker } from './node-status.js';

export const UPGRADE_POLL_INTERVAL_MS = 1000;
/** How long close() waits for a pass in flight. */
const CLOSE_WAIT_MS = 500;
/** Compare-and-swap attempts of one write before the pass gives up (the next pass tries again). */
const SWAP_ATTEMPTS = 20;

export type UpgradeStore = Pick<ClusterStore, 'readKubernetesUpgrade' | 'swapKubernetesUpgrade'>;

export interface KubernetesUpgradeAgentOptions {
  nodeName: string;
  /** A client of the cluster store, opened on first use (and again after a failed open). */
  openStore: () => Promise<UpgradeStore & Pick<ClusterStore, 'close'>>;
  backend: Pick<KubernetesBackend, 'name' | 'upgradeControlPlane'>;
  /** What the node reports; its Kubernetes version is the one it runs now. */
  status: Pick<NodeStatusTracker, 'get' | 'setKubernetesVersion'>;
  /** Keeps the version on the node's state disk (its cluster record). */
  keepVersion: (version: string) => Promise<void>;
  logger: Logger;
  clock: Clock;
  sleep?: Sleep;
  pollIntervalMs?: number;
}

/** What one pass did. */
export type UpgradeStep =
  'no-upgrade' | 'up-to-date' | 'waiting' | 'failed-before' | 'claim-lost' | 'applied' | 'followed' | 'failed';

export class KubernetesUpgradeAgent {
  private store: (UpgradeStore & Pick<ClusterStore, 'close'>) | undefined;
  private readonly stop = new AbortController();
  private loop: Promise<void> | undefined;
  private lastProblem: string | undefined;

  constructor(private readonly options: KubernetesUpgradeAgentOptions) {}

  /** Follows the record every poll interval until close(); a pass that fails is logged (once per reason) and repeated. */
  start(): void {
    const { logger } = this.options;
    const sleep = this.options.sleep ?? realSleep;
    this.loop ??= (async () => {
      while (!this.stop.signal.aborted) {
        try {
          await this.step();
          this.lastProblem = undefined;
        } catch (err) {
          const reason = describeError(err);
          if (reason !== this.lastProblem)
            logger.warn('cannot follow the Kubernetes upgrade record of the cluster store now', { reason });
          this.lastProblem = reason;
        }
        await sleep(this.options.pollIntervalMs ?? UPGRADE_POLL_INTERVAL_MS, this.stop.signal).catch(() => undefined);
      }
    })();
  }

  async close(): Promise<void> {
    this.stop.abort();
    // A pass in flight may wait on a store whose other members are stopping with this node (a whole control plane
    // going down): the node does not wait for it longer than CLOSE_WAIT_MS; an interrupted pass is one a crash would
    // interrupt, and the next start repeats it.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.loop, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
    const store = this.store;
    this.store = undefined;
    await store?.close();
  }

  /** One pass over the record. */
  async step(): Promise<UpgradeStep> {
    const store = (this.store ??= await this.options.openStore());
    const { nodeName: me, logger } = this.options;
    const read = await store.readKubernetesUpgrade();
    if (!read) return 'no-upgrade';
    let upgrade = read.upgrade;
    const running = this.options.status.get().kubernetesVersion;
    if (sameVersion(running, upgrade.version)) {
      const mine = upgrade.nodes[me];
      if (mine?.result !== 'upgraded' || (upgrade.first === me && !upgrade.applied))
        await this.update(store, upgrade.version, (u) => this.upgraded(u));
      return 'up-to-date';
    }
    if (upgrade.nodes[me]?.result === 'failed') return 'failed-before';
    if (upgrade.first === undefined) {
      const claimed = { ...upgrade, first: me };
      if (!(await store.swapKubernetesUpgrade(claimed, read.revision))) return 'claim-lost';
      logger.info(`claimed the cluster's Kubernetes upgrade to ${upgrade.version}: this control plane runs it first`);
      upgrade = claimed;
    }
    const first = upgrade.first === me;
    if (!first && !upgrade.applied) return 'waiting';
    try {
      const result = await this.options.backend.upgradeControlPlane({
        nodeName: me,
        version: upgrade.version,
        from: running || upgrade.from,
        first,
        log: logger.child({ component: `kubernetes-${this.options.backend.name}` }),
      });
      logger.info(result.message);
    } catch (err) {
      const reason = describeError(err);
      logger.error(`the Kubernetes upgrade to ${upgrade.version} failed`, { first, reason });
      await this.update(store, upgrade.version, (u) => ({
        ...u,
        nodes: { ...u.nodes, [me]: { result: 'failed', reason, at: this.now() } },
      }));
      return 'failed';
    }
    await this.options.keepVersion(upgrade.version);
    this.options.status.setKubernetesVersion(upgrade.version);
    await this.update(store, upgrade.version, (u) => this.upgraded(u));
    return first ? 'applied' : 'followed';
  }

  /** The record saying this node is upgraded (and, if it is the first, that the cluster-wide step is done). */
  private upgraded(u: KubernetesUpgrade): KubernetesUpgrade {
    const me = this.options.nodeName;
    return {
      ...u,
      ...(u.first === me ? { applied: true } : {}),
      nodes: { ...u.nodes, [me]: { result: 'upgraded', at: this.now() } },
    };
  }

  /** Read, change, compare-and-swap, until it is written; nothing when the record now asks for another version. */
  private async update(
    store: UpgradeStore,
    version: string,
    change: (u: KubernetesUpgrade) => KubernetesUpgrade,
  ): Promise<void> {
    for (let attempt = 0; attempt < SWAP_ATTEMPTS; attempt++) {
      const read = await store.readKubernetesUpgrade();
      if (!read || read.upgrade.version !== version) return;
      if (await store.swapKubernetesUpgrade(change(read.upgrade), read.revision)) return;
    }
    throw new Error(`the Kubernetes upgrade record changed under each of ${SWAP_ATTEMPTS} attempts to write it`);
  }

  private now(): string {
    return this.options.clock().toISOString();
  }
}

/** "v1.32.10" and "1.32.10" are the same version. */
export function sameVersion(a: string, b: string): boolean {
  return a.replace(/^v/, '') === b.replace(/^v/, '');
}
