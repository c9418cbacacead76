/**
 * What the join service works from: the cluster store's join configuration (lib/cluster-store), read for every
 * request (a linearizable read: a store without quorum refuses, so no ticket is ever made from stale state) and
 * kept, with what was built from it (the loaded PKI, validators), for as long as the store's revision stays the
 * same. Concurrent requests share one read. A new revision that is malformed, or whose validators cannot be built,
 * is refused with a warning (once per revision) and the last good configuration stays in use: a bad write never
 * takes the join services down.
 */
import { StoreUnavailableError, type ClusterStore, type JoinConfig } from '../lib/cluster-store/types.js';
import { UserError } from '../lib/errors.js';
import type { Logger } from '../lib/logging/index.js';
import { loadClusterPki, PKI_FILE_NAMES, type ClusterPki } from '../lib/pki/cluster-pki.js';
import type { ControlPlaneFile } from '../proto/gen/constellation/join.js';

/** A join configuration ready to use. `generation` grows by one with each new revision taken into use. */
export interface LoadedJoinConfig extends JoinConfig {
  generation: number;
  revision: string;
  /** The PKI, loaded and checked. */
  loadedPki: ClusterPki;
}

export interface JoinConfigReaderOptions {
  logger: Logger;
  /** Further checks of a new configuration (e.g. building its validator); throwing refuses it like a malformed one. */
  accept?: (config: LoadedJoinConfig) => Promise<void>;
}

export class JoinConfigReader {
  private last: LoadedJoinConfig | undefined;
  private rejected = '';
  private reading: Promise<LoadedJoinConfig> | undefined;

  constructor(
    private readonly store: ClusterStore,
    private readonly options: JoinConfigReaderOptions,
  ) {}

  /**
   * The configuration to use for a request that starts now. StoreUnavailableError without a quorum; a UserError
   * when the store holds no valid configuration at all.
   */
  current(): Promise<LoadedJoinConfig> {
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<LoadedJoinConfig> {
    let read: Awaited<ReturnType<ClusterStore['readJoinConfig']>>;
    try {
      read = await this.store.readJoinConfig();
    } catch (err) {
      // Unavailable (no quorum) is never answered from memory; a malformed store keeps the last good configuration.
      if (err instanceof StoreUnavailableError || !this.last || !(err instanceof UserError)) throw err;
      return this.keep(this.last, 'malformed', err);
    }
    if (this.last && read.revision === this.last.revision) return this.last;
    if (this.last && read.revision === this.rejected) return this.last;
    try {
      const loaded: LoadedJoinConfig = {
        ...read.config,
        generation: (this.last?.generation ?? 0) + 1,
        revision: read.revision,
        loadedPki: loadClusterPki(read.config.pki, "the cluster store's PKI"),
      };
      await this.options.accept?.(loaded);
      if (this.last) {
        this.options.logger.info('join configuration reloaded', {
          generation: loaded.generation,
          variant: loaded.attestation.variant,
        });
      }
      this.last = loaded;
      this.rejected = '';
      return loaded;
    } catch (err) {
      if (!this.last) throw err;
      return this.keep(this.last, read.revision, err);
    }
  }

  /** Logs (once per broken revision) that the last good configuration stays in use. */
  private keep(last: LoadedJoinConfig, revision: string, err: unknown): LoadedJoinConfig {
    if (revision !== this.rejected) {
      this.rejected = revision;
      this.options.logger.warn('the join configuration in the cluster store is invalid; keeping the last good one', {
        generation: last.generation,
        reason: err instanceof UserError ? err.message : String((err as Error)?.message ?? err),
      });
    }
    return last;
  }
}

/** The files a joining control-plane node receives: the cluster PKI by kubeadm's names (for /etc/kubernetes/pki). */
export function controlPlaneFiles(config: JoinConfig): ControlPlaneFile[] {
  return PKI_FILE_NAMES.map((name) => ({ name, data: Buffer.from(config.pki[name]) }));
}
