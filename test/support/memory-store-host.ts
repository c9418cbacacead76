/** A hand-written ClusterStoreHost for unit tests: the store is a MemoryClusterStore; it counts what it was asked. */
import type { ClusterStoreHost, StoreCredentials } from '../../bootstrapper/store-host.js';
import { MemoryClusterStore } from '../../lib/cluster-store/memory.js';
import type { ClusterStore } from '../../lib/cluster-store/types.js';

export class MemoryStoreHost implements ClusterStoreHost {
  readonly store = new MemoryClusterStore();
  created = 0;
  /** The `alone` of each create(). */
  createdAlone: (boolean | undefined)[] = [];
  joined: string[][] = [];
  resumed = 0;
  private member = false;

  async create(_pki: unknown, options: { alone?: boolean } = {}): Promise<void> {
    this.created++;
    this.createdAlone.push(options.alone);
    this.member = true;
  }

  async join(_pki: unknown, endpoints: string[]): Promise<void> {
    this.joined.push(endpoints);
    this.member = true;
  }

  async hosted(): Promise<boolean> {
    return this.member;
  }

  async resume(): Promise<void> {
    this.resumed++;
  }

  async open(): Promise<ClusterStore> {
    return this.store;
  }

  async openAsAdmin(): Promise<ClusterStore> {
    return this.store;
  }

  async adminCredentials(): Promise<StoreCredentials> {
    return {
      backend: 'etcd',
      endpoints: ['https://127.0.0.1:2379'],
      caCert: 'ca',
      clientCert: 'cert',
      clientKey: 'key',
    };
  }

  async close(): Promise<void> {}
}
