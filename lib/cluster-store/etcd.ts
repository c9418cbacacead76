/**
 * The cluster store in etcd (`none` nodes: an etcd cluster stacked on the control planes, docs/design.md#cluster-store), through the
 * `etcd3` client with mutual TLS from the cluster's etcd CA. Entries (./codec.ts) live below /constellation/.
 * Reads are linearizable and every call has a deadline with no retries of its own: a member that lost its quorum
 * makes the call fail fast with StoreUnavailableError instead of answering stale data or hanging. The one exception:
 * while leadership moves (a control plane leaving hands it on, docs/workflows/upgrade.md), etcd answers reads with
 * "leader changed"; reads, which change nothing, are asked again for up to ELECTION_WAIT_MS, as etcd's Go client
 * retries them, so a join or a join service's health check does not fail on a store that keeps its quorum.
 * Membership (members, learners, promotion, removal) is ./etcd-members.ts.
 */
import type { Etcd3, IOptions } from 'etcd3';
import { UserError } from '../errors.js';
import { ETCD_SERVER_NAME } from '../pki/cluster-pki.js';
import { pollUntil } from '../poll.js';
import type * as CodecModule from './codec.js';
import { ENTRY, JOIN_CONFIG_PREFIX, NODES_PREFIX } from './entries.js';
import {
  StoreUnavailableError,
  type ClusterStore,
  type JoinConfig,
  type KubernetesUpgrade,
  type NodeRecord,
} from './types.js';

type Codec = typeof CodecModule;

export const STORE_PREFIX = '/constellation/';
export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;
/** How long a read waits out an election: a leader transfer takes a few heartbeats (100 ms each), an election after a
 * leader left one election timeout (1 s), longer on a loaded machine. */
const ELECTION_WAIT_MS = 2_000;
const ELECTION_RUNNING = /etcdserver: (leader changed|no leader)/;

/** How to reach etcd: client URLs and the client's TLS material (PEM). */
export interface EtcdConnection {
  /** e.g. ["https://127.0.4.10:2379"]. */
  endpoints: string[];
  caCert: string;
  clientCert: string;
  clientKey: string;
}

export interface EtcdStoreOptions extends EtcdConnection {
  /** Deadline of one call; default 3 s. */
  timeoutMs?: number;
}

/**
 * Starts loading the etcd3 client's modules and the entries' codec (with its zod schemas) in the background, for a
 * process that idles before it needs the store: their load parses etcd's API definitions and compiles zod (a few
 * hundred milliseconds of CPU on this machine, many seconds in a VM under emulation), which a later etcdClient() or
 * EtcdClusterStore.connect() then need not wait for. Errors surface there, not here.
 */
export function preloadEtcdClient(): void {
  void Promise.all([import('etcd3'), import('cockatiel'), import('./codec.js')]).catch(() => undefined);
}

/** An etcd3 client without retries or circuit breakers of its own, every unary call with a deadline. */
export async function etcdClient(options: EtcdStoreOptions): Promise<Etcd3> {
  const [{ Etcd3, isRecoverableError }, { handleWhen, noop, retry, ConstantBackoff }] = await Promise.all([
    import('etcd3'),
    import('cockatiel'),
  ]);
  const timeoutMs = options.timeoutMs ?? 3000;
  const clientOptions: IOptions = {
    hosts: options.endpoints,
    credentials: {
      rootCertificate: Buffer.from(options.caCert),
      certChain: Buffer.from(options.clientCert),
      privateKey: Buffer.from(options.clientKey),
    },
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeoutMs }),
    // One endpoint (a node's own member): fail fast. Several (the CLI): a member that is down must not fail the
    // call, so it is tried once on each endpoint (etcd3 picks another host for every retry).
    faultHandling: {
      host: () => noop,
      global:
        options.endpoints.length > 1
          ? retry(handleWhen(isRecoverableError), {
              maxAttempts: options.endpoints.length,
              backoff: new ConstantBackoff(0),
            })
          : noop,
    },
    grpcOptions: {
      'grpc.enable_channelz': 0,
      // Every member's certificate carries this name; a TLS server name must not be an IP address (RFC 6066).
      'grpc.ssl_target_name_override': ETCD_SERVER_NAME,
      // A member that was away (restarted, rebooted) is tried again within a second or two, not after gRPC's default
      // backoff (1 s, growing to 2 min), during which every call fails at once.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2000,
    },
  };
  return new Etcd3(clientOptions);
}

export class EtcdClusterStore implements ClusterStore {
  readonly backend = 'etcd' as const;

  private constructor(
    private readonly client: Etcd3,
    private readonly where: string,
    private readonly codec: Codec,
  ) {}

  static async connect(options: EtcdStoreOptions): Promise<EtcdClusterStore> {
    // The codec (and its zod schemas) loads with the first store, not with the node program that imports this
    // module before it listens.
    const [client, codec] = await Promise.all([etcdClient(options), import('./codec.js')]);
    return new EtcdClusterStore(client, `the cluster store (etcd at ${options.endpoints.join(', ')})`, codec);
  }

  async readJoinConfig(): Promise<{ config: JoinConfig; revision: string }> {
    const response = await this.read(() => this.client.getAll().prefix(`${STORE_PREFIX}${JOIN_CONFIG_PREFIX}`).exec());
    const entries = new Map<string, string>();
    let revision = 0n;
    for (const kv of response.kvs) {
      entries.set(kv.key.toString('utf8').slice(STORE_PREFIX.length), kv.value.toString('utf8'));
      const mod = BigInt(kv.mod_revision);
      if (mod > revision) revision = mod;
    }
    return { config: this.codec.decodeJoinConfig(entries, this.where), revision: `${revision}:${response.kvs.length}` };
  }

  async writeJoinConfig(parts: Partial<JoinConfig>): Promise<void> {
    const entries = this.codec.encodeJoinConfig(parts);
    // One transaction: readers see all of the parts or none of them.
    await this.call(async () => {
      const txn = this.client.if(`${STORE_PREFIX}${ENTRY.cluster}`, 'Version', '>', -1); // always true
      await txn
        .then(...[...entries].map(([key, value]) => this.client.put(`${STORE_PREFIX}${key}`).value(value)))
        .commit();
    });
  }

  async claimDisk(diskUuid: string, instance: string): Promise<string> {
    const key = `${STORE_PREFIX}${ENTRY.disk(diskUuid)}`;
    const result = await this.call(() =>
      this.client
        .if(key, 'Create', '==', 0)
        .then(this.client.put(key).value(instance))
        .else(this.client.get(key))
        .commit(),
    );
    if (result.succeeded) return instance;
    const owner = result.responses[0]?.response_range?.kvs[0]?.value.toString('utf8');
    if (!owner) throw new UserError(`${this.where}: the claim of disk ${diskUuid} could not be read back.`);
    return owner;
  }

  async putNode(record: NodeRecord): Promise<void> {
    await this.call(() =>
      this.client
        .put(`${STORE_PREFIX}${ENTRY.node(record.name)}`)
        .value(this.codec.encodeNode(record))
        .exec(),
    );
  }

  async getNode(name: string): Promise<NodeRecord | undefined> {
    const key = `${STORE_PREFIX}${ENTRY.node(name)}`;
    const text = await this.read(() => this.client.get(key).string());
    return text === null ? undefined : this.codec.decodeNode(text, `${this.where}: ${key}`);
  }

  async listNodes(): Promise<NodeRecord[]> {
    const response = await this.read(() => this.client.getAll().prefix(`${STORE_PREFIX}${NODES_PREFIX}`).exec());
    return response.kvs.map((kv) =>
      this.codec.decodeNode(kv.value.toString('utf8'), `${this.where}: ${kv.key.toString('utf8')}`),
    );
  }

  async deleteNode(name: string): Promise<void> {
    await this.call(() =>
      this.client
        .delete()
        .key(`${STORE_PREFIX}${ENTRY.node(name)}`)
        .exec(),
    );
  }

  async readKubernetesUpgrade(): Promise<{ upgrade: KubernetesUpgrade; revision: string } | undefined> {
    const key = `${STORE_PREFIX}${ENTRY.kubernetesUpgrade}`;
    const response = await this.read(() => this.client.get(key).exec());
    const kv = response.kvs[0];
    return kv
      ? {
          upgrade: this.codec.decodeKubernetesUpgrade(kv.value.toString('utf8'), `${this.where}: ${key}`),
          revision: String(kv.mod_revision),
        }
      : undefined;
  }

  /** One transaction conditional on the key's mod revision (or on its absence). */
  async swapKubernetesUpgrade(upgrade: KubernetesUpgrade, revision: string | undefined): Promise<boolean> {
    const key = `${STORE_PREFIX}${ENTRY.kubernetesUpgrade}`;
    const value = this.codec.encodeKubernetesUpgrade(upgrade);
    const result = await this.call(() =>
      (revision === undefined ? this.client.if(key, 'Create', '==', 0) : this.client.if(key, 'Mod', '==', revision))
        .then(this.client.put(key).value(value))
        .commit(),
    );
    return result.succeeded;
  }

  async memberEndpoints(): Promise<string[]> {
    const response = await this.read(() => this.client.cluster.memberList({ linearizable: true }));
    return response.members.filter((m) => !m.isLearner).flatMap((m) => m.clientURLs);
  }

  async close(): Promise<void> {
    this.client.close();
  }

  private call<T>(fn: () => Promise<T>): Promise<T> {
    return unavailableOnError(fn);
  }

  /** A read, asked again while an election runs (see the module header). */
  private read<T>(fn: () => Promise<T>): Promise<T> {
    let last: unknown;
    return this.call(async () => {
      const answer = await pollUntil(
        async () => {
          try {
            return { value: await fn() };
          } catch (err) {
            if (!ELECTION_RUNNING.test(String((err as Error)?.message))) throw err;
            last = err;
            return undefined;
          }
        },
        { timeoutMs: ELECTION_WAIT_MS, intervalMs: 50, onTimeout: () => Promise.reject(last) },
      );
      return answer.value;
    });
  }
}

/**
 * Runs an etcd call; a request etcd's access control refused (./etcd-access.ts) becomes StoreAccessDeniedError, any
 * other failure of etcd itself (no quorum, unreachable, deadline) StoreUnavailableError.
 */
export async function unavailableOnError<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof UserError) throw err;
    if (accessDenied(err)) throw new StoreAccessDeniedError(etcdErrorDetail(err), { cause: err });
    throw new StoreUnavailableError(etcdErrorDetail(err), { cause: err });
  }
}

/** etcd refused the request: the certificate's user lacks the permission, or names no user. */
function accessDenied(err: unknown): boolean {
  const name = (err as Error)?.name ?? '';
  return (
    name === 'EtcdPermissionDeniedError' ||
    name === 'EtcdUserNotFoundError' ||
    /permission denied|user name not found/i.test(String((err as Error)?.message ?? ''))
  );
}

/** etcd's access control refused a request: the client's certificate is not one that may make it. */
export class StoreAccessDeniedError extends UserError {
  constructor(detail: string, options: { cause?: unknown } = {}) {
    super(`The cluster store refused the request: this client's certificate may not make it (${detail}).`, {
      hint: 'The CLI reaches the store with the certificate in constellation-store.json (made at init); use the workspace that initialized the cluster.',
      cause: options.cause,
    });
  }
}

/** A short reason from an etcd3/gRPC error (its messages carry no secrets: keys and values are never in them). */
export function etcdErrorDetail(err: unknown): string {
  const message = String((err as Error)?.message ?? err);
  if (/deadline|timed out|DEADLINE_EXCEEDED/i.test(message)) return 'etcd did not answer in time';
  if (ELECTION_RUNNING.test(message)) return 'etcd was electing a leader';
  if (/ECONNREFUSED|UNAVAILABLE|No connection established/i.test(message)) return 'no etcd member answers';
  return message.split('\n')[0].slice(0, 200);
}
