/**
 * The cluster store in the Kubernetes API (`kubeadm` nodes, docs/design.md#cluster-store), laid out like upstream Constellation's
 * join-config, through @kubernetes/client-node with an admin kubeconfig (the node's /etc/kubernetes/admin.conf,
 * the CLI's constellation-admin.conf). Objects live in kube-system; values are exactly what ./codec.ts encodes,
 * so every backend stores the same text; Kubernetes keys cannot hold "/", so each entry has a place:
 *
 *   ConfigMap join-config                 attestationConfig, measurementSalt (upstream's keys), clusterInfo; its
 *                                         annotation constellation.edgeless.systems/join-secrets names the Secret ↓
 *   Secret join-secrets-<random>          masterSecret, joinServiceKey, pki.<kubeadm name, "/" as ".">; immutable
 *   ConfigMap constellation-node-<name>   record: the node record
 *   ConfigMap constellation-disk-<uuid>   instance: the instance that claimed the disk (UUID in lowercase)
 *   ConfigMap constellation-kubernetes-upgrade
 *                                         upgrade: the Kubernetes upgrade record; its compare-and-swap is a create
 *                                         (409 when it exists) or an update conditional on its resourceVersion
 *
 * Reads are plain GETs and LISTs without a resourceVersion, which the API server answers with a quorum read from
 * etcd, never from its watch cache. A write of secret entries creates a new immutable Secret and then points
 * join-config at it with an update conditional on join-config's resourceVersion (retried on 409): that update is
 * the commit, so a reader sees the old or the new join configuration, never half of each. The replaced Secret is
 * deleted afterwards (a reader that followed join-config to it a moment before reads join-config again); a writer
 * that dies between the two steps leaves an unreferenced Secret behind, which nothing reads. The revision is
 * join-config's resourceVersion with its Secret's. A disk is claimed by creating its ConfigMap: the API server lets
 * exactly one create of a name succeed, so the first claim wins across all join services.
 *
 * An API server that does not answer (connection refused, timeout, 5xx, 429) is StoreUnavailableError; 401 and
 * 403 are UserErrors naming the kubeconfig. No message carries a value of the Secret.
 */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { CoreV1Api, V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { UserError } from '../errors.js';
import { PKI_FILE_NAMES } from '../pki/cluster-pki.js';
import {
  decodeJoinConfig,
  decodeKubernetesUpgrade,
  decodeNode,
  encodeJoinConfig,
  encodeKubernetesUpgrade,
  encodeNode,
  ENTRY,
} from './codec.js';
import {
  StoreUnavailableError,
  type ClusterStore,
  type JoinConfig,
  type KubernetesUpgrade,
  type NodeRecord,
} from './types.js';

export const STORE_NAMESPACE = 'kube-system';
export const JOIN_CONFIG_MAP = 'join-config';
/** On join-config: the name of the Secret that holds the secret entries of the same join configuration. */
export const JOIN_SECRETS_ANNOTATION = 'constellation.edgeless.systems/join-secrets';
/** On every object of the store but join-config: join-secrets, node-record, disk-claim or kubernetes-upgrade. */
export const STORE_LABEL = 'constellation.edgeless.systems/cluster-store';
export const JOIN_SECRETS_PREFIX = 'join-secrets-';
export const NODE_PREFIX = 'constellation-node-';
export const DISK_PREFIX = 'constellation-disk-';
export const KUBERNETES_UPGRADE_MAP = 'constellation-kubernetes-upgrade';
export const KUBERNETES_UPGRADE_KEY = 'upgrade';
export const NODE_KEY = 'record';
export const DISK_KEY = 'instance';

/** Where each entry of the join configuration lives: join-config or its Secret, under which key. */
export const JOIN_ENTRY_PLACES: ReadonlyMap<string, { in: 'configmap' | 'secret'; key: string }> = new Map([
  [ENTRY.attestationConfig, { in: 'configmap', key: 'attestationConfig' }],
  [ENTRY.measurementSalt, { in: 'configmap', key: 'measurementSalt' }],
  [ENTRY.cluster, { in: 'configmap', key: 'clusterInfo' }],
  [ENTRY.masterSecret, { in: 'secret', key: 'masterSecret' }],
  [ENTRY.joinServiceKey, { in: 'secret', key: 'joinServiceKey' }],
  ...PKI_FILE_NAMES.map(
    (name) => [ENTRY.pki(name), { in: 'secret', key: `pki.${name.replaceAll('/', '.')}` }] as const,
  ),
]);

const DEFAULT_TIMEOUT_MS = 3000;
/** How often a write is tried again when another writer changed join-config in between (409). */
const WRITE_ATTEMPTS = 10;
/** A DNS-1123 subdomain: the names of ConfigMaps and Secrets. */
const OBJECT_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export interface KubernetesStoreOptions {
  /** The kubeconfig: a file, or its text. Its current context's cluster and user are used. */
  kubeconfig: { path: string } | { text: string };
  /** Deadline of one request; default 3 s. */
  timeoutMs?: number;
}

type Kind = 'ConfigMap' | 'Secret';

export class KubernetesClusterStore implements ClusterStore {
  readonly backend = 'kubernetes' as const;

  private constructor(
    private readonly api: CoreV1Api,
    /** The API server's URL. */
    private readonly server: string,
    /** Names the kubeconfig in messages. */
    private readonly source: string,
    private readonly timeoutMs: number,
  ) {}

  /** Loads the kubeconfig (client-node is loaded only now); no request is made yet. */
  static async connect(options: KubernetesStoreOptions): Promise<KubernetesClusterStore> {
    const k8s = await import('@kubernetes/client-node');
    const source = 'path' in options.kubeconfig ? options.kubeconfig.path : 'the kubeconfig';
    const config = new k8s.KubeConfig();
    try {
      if ('path' in options.kubeconfig) config.loadFromFile(options.kubeconfig.path);
      else config.loadFromString(options.kubeconfig.text);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw new UserError(`There is no kubeconfig at ${source}.`, { cause: err });
      // The parser's message may quote the file, which holds a private key: name the file only.
      throw new UserError(`${capitalize(source)} is not a kubeconfig (YAML with clusters, users and contexts).`);
    }
    const cluster = config.getCurrentCluster();
    if (!cluster?.server || !config.getCurrentUser()) {
      throw new UserError(`${capitalize(source)} names no cluster and user to use (its current-context).`, {
        hint: "Use the cluster's admin kubeconfig: constellation-admin.conf in the workspace, /etc/kubernetes/admin.conf on a control-plane node.",
      });
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const api = new k8s.CoreV1Api(
      k8s.createConfiguration({
        baseServer: new k8s.ServerConfiguration(cluster.server, {}),
        authMethods: { default: config },
        // client-node has no deadline of its own: an API server that accepts and never answers would hang the caller.
        promiseMiddleware: [
          {
            pre: async (context) => {
              context.setSignal(AbortSignal.timeout(timeoutMs));
              return context;
            },
            post: async (response) => response,
          },
        ],
      }),
    );
    return new KubernetesClusterStore(api, cluster.server, source, timeoutMs);
  }

  private get where(): string {
    return `the cluster store (the Kubernetes API at ${this.server})`;
  }

  async readJoinConfig(): Promise<{ config: JoinConfig; revision: string }> {
    let previous: string | undefined;
    for (;;) {
      const map = await this.read('ConfigMap', JOIN_CONFIG_MAP);
      const entries = new Map<string, string>();
      if (!map) return { config: decodeJoinConfig(entries, this.where), revision: '' };
      addEntries(entries, 'configmap', map.data);
      const secretName = map.metadata?.annotations?.[JOIN_SECRETS_ANNOTATION];
      let secretRevision = '';
      if (secretName) {
        const secret = await this.read('Secret', secretName);
        if (!secret) {
          // Replaced by a write since join-config was read: read join-config again, unless it did not change.
          if (map.metadata?.resourceVersion !== previous) {
            previous = map.metadata?.resourceVersion;
            continue;
          }
          throw new UserError(
            `${this.where}: ConfigMap ${STORE_NAMESPACE}/${JOIN_CONFIG_MAP} names the Secret ${secretName}, which does not exist.`,
            {
              hint: 'Write the join configuration again (its secret entries are lost with that Secret: restore them from the workspace).',
            },
          );
        }
        addEntries(entries, 'secret', decodeSecretData(secret.data));
        secretRevision = secret.metadata?.resourceVersion ?? '';
      }
      return {
        config: decodeJoinConfig(entries, this.where),
        revision: `${map.metadata?.resourceVersion ?? ''}/${secretRevision}`,
      };
    }
  }

  async writeJoinConfig(parts: Partial<JoinConfig>): Promise<void> {
    const data = { configmap: {} as Record<string, string>, secret: {} as Record<string, string> };
    for (const [entry, value] of encodeJoinConfig(parts)) {
      const place = JOIN_ENTRY_PLACES.get(entry)!;
      data[place.in][place.key] = value;
    }
    for (let attempt = 1; ; attempt++) {
      const current = await this.read('ConfigMap', JOIN_CONFIG_MAP);
      const oldSecret = current?.metadata?.annotations?.[JOIN_SECRETS_ANNOTATION];
      const newSecret =
        Object.keys(data.secret).length > 0 ? await this.newJoinSecret(oldSecret, data.secret) : oldSecret;
      const body: V1ConfigMap = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          ...(current?.metadata ?? { name: JOIN_CONFIG_MAP, namespace: STORE_NAMESPACE }),
          annotations: {
            ...current?.metadata?.annotations,
            ...(newSecret ? { [JOIN_SECRETS_ANNOTATION]: newSecret } : {}),
          },
        },
        data: { ...current?.data, ...data.configmap },
      };
      let committed: boolean;
      try {
        committed = current
          ? (await this.replace('ConfigMap', body, [409])) !== 409
          : (await this.create('ConfigMap', body, [409])) !== 409;
      } catch (err) {
        if (newSecret !== oldSecret) await this.remove('Secret', newSecret!).catch(() => undefined);
        throw err;
      }
      if (committed) {
        // The write is done; a replaced Secret that cannot be deleted now is only clutter.
        if (oldSecret && newSecret !== oldSecret) await this.remove('Secret', oldSecret).catch(() => undefined);
        return;
      }
      if (newSecret !== oldSecret) await this.remove('Secret', newSecret!).catch(() => undefined);
      if (attempt >= WRITE_ATTEMPTS) {
        throw new UserError(
          `${this.where}: ConfigMap ${STORE_NAMESPACE}/${JOIN_CONFIG_MAP} changed under each of ${WRITE_ATTEMPTS} attempts to write it.`,
          {
            hint: 'Another writer keeps changing the join configuration; try again when it is done.',
          },
        );
      }
    }
  }

  async claimDisk(diskUuid: string, instance: string): Promise<string> {
    const name = objectName(DISK_PREFIX, diskUuid.toLowerCase(), `The disk UUID "${diskUuid}"`);
    for (;;) {
      const created = await this.create('ConfigMap', storeObject(name, 'disk-claim', { [DISK_KEY]: instance }), [409]);
      if (created !== 409) return instance;
      const claim = await this.read('ConfigMap', name);
      // Deleted since the create was refused (by hand): claim it again.
      if (!claim) continue;
      const owner = claim.data?.[DISK_KEY];
      if (!owner) throw new UserError(`${this.where}: ConfigMap ${STORE_NAMESPACE}/${name} holds no "${DISK_KEY}".`);
      return owner;
    }
  }

  async putNode(record: NodeRecord): Promise<void> {
    const body = storeObject(objectName(NODE_PREFIX, record.name, `The node name "${record.name}"`), 'node-record', {
      [NODE_KEY]: encodeNode(record),
    });
    // An unconditional update, or a create when there is nothing to update yet (and an update when a create raced us).
    for (;;) {
      if ((await this.replace('ConfigMap', body, [404])) !== 404) return;
      if ((await this.create('ConfigMap', body, [409])) !== 409) return;
    }
  }

  async getNode(name: string): Promise<NodeRecord | undefined> {
    const objectNameOfNode = objectName(NODE_PREFIX, name, `The node name "${name}"`);
    const item = await this.read('ConfigMap', objectNameOfNode);
    if (!item) return undefined;
    const where = `${this.where}: ConfigMap ${STORE_NAMESPACE}/${objectNameOfNode}`;
    const text = item.data?.[NODE_KEY];
    if (text === undefined) throw new UserError(`${where} holds no "${NODE_KEY}".`);
    return decodeNode(text, where);
  }

  async listNodes(): Promise<NodeRecord[]> {
    const list = await this.request(`list the ConfigMaps ${STORE_LABEL}=node-record in ${STORE_NAMESPACE}`, () =>
      this.api.listNamespacedConfigMap({ namespace: STORE_NAMESPACE, labelSelector: `${STORE_LABEL}=node-record` }),
    );
    return list.items.map((item) => {
      const where = `${this.where}: ConfigMap ${STORE_NAMESPACE}/${item.metadata?.name}`;
      const text = item.data?.[NODE_KEY];
      if (text === undefined) throw new UserError(`${where} holds no "${NODE_KEY}".`);
      return decodeNode(text, where);
    });
  }

  async deleteNode(name: string): Promise<void> {
    await this.remove('ConfigMap', objectName(NODE_PREFIX, name, `The node name "${name}"`));
  }

  async readKubernetesUpgrade(): Promise<{ upgrade: KubernetesUpgrade; revision: string } | undefined> {
    const map = await this.read('ConfigMap', KUBERNETES_UPGRADE_MAP);
    if (!map) return undefined;
    const where = `${this.where}: ConfigMap ${STORE_NAMESPACE}/${KUBERNETES_UPGRADE_MAP}`;
    const text = map.data?.[KUBERNETES_UPGRADE_KEY];
    if (text === undefined) throw new UserError(`${where} holds no "${KUBERNETES_UPGRADE_KEY}".`);
    return { upgrade: decodeKubernetesUpgrade(text, where), revision: map.metadata?.resourceVersion ?? '' };
  }

  async swapKubernetesUpgrade(upgrade: KubernetesUpgrade, revision: string | undefined): Promise<boolean> {
    const body = storeObject(KUBERNETES_UPGRADE_MAP, 'kubernetes-upgrade', {
      [KUBERNETES_UPGRADE_KEY]: encodeKubernetesUpgrade(upgrade),
    });
    if (revision === undefined) return (await this.create('ConfigMap', body, [409])) !== 409;
    // Never unconditional: an empty resourceVersion would make the update succeed whatever the object holds.
    if (revision === '') return false;
    body.metadata!.resourceVersion = revision;
    const result = await this.replace('ConfigMap', body, [404, 409]);
    return result !== 404 && result !== 409;
  }

  /** kubeadm adds a joining control plane to its etcd by itself. */
  async memberEndpoints(): Promise<string[]> {
    return [];
  }

  /** Nothing to close: every request has a connection of its own. */
  async close(): Promise<void> {}

  /**
   * A new immutable Secret with the old one's entries and `data` over them; the old name when nothing changes.
   * A join-config that names a missing Secret gets one with `data` only (the read then names what is missing).
   */
  private async newJoinSecret(oldName: string | undefined, data: Record<string, string>): Promise<string> {
    const old = oldName ? await this.read('Secret', oldName) : undefined;
    const merged = { ...old?.data, ...encodeSecretData(data) };
    if (old && oldName && isDeepStrictEqual(merged, old.data ?? {})) return oldName;
    const name = `${JOIN_SECRETS_PREFIX}${randomBytes(5).toString('hex')}`;
    const secret: V1Secret = {
      ...storeObject(name, 'join-secrets', {}),
      kind: 'Secret',
      type: 'Opaque',
      immutable: true,
      data: merged,
    };
    await this.create('Secret', secret, []);
    return name;
  }

  private async read<K extends Kind>(
    kind: K,
    name: string,
  ): Promise<(K extends 'Secret' ? V1Secret : V1ConfigMap) | undefined> {
    const params = { name, namespace: STORE_NAMESPACE };
    const result = await this.request(
      `read ${kind} ${STORE_NAMESPACE}/${name}`,
      () => (kind === 'Secret' ? this.api.readNamespacedSecret(params) : this.api.readNamespacedConfigMap(params)),
      [404],
    );
    return result === 404 ? undefined : (result as K extends 'Secret' ? V1Secret : V1ConfigMap);
  }

  private async create<C extends number>(
    kind: Kind,
    body: V1ConfigMap | V1Secret,
    accept: readonly C[],
  ): Promise<object | C> {
    const params = { namespace: STORE_NAMESPACE, body };
    return this.request(
      `create ${kind} ${STORE_NAMESPACE}/${body.metadata!.name}`,
      () => (kind === 'Secret' ? this.api.createNamespacedSecret(params) : this.api.createNamespacedConfigMap(params)),
      accept,
    );
  }

  /** An update: conditional when `body` carries a resourceVersion (a conflict is 409), else unconditional. */
  private async replace<C extends number>(
    kind: 'ConfigMap',
    body: V1ConfigMap,
    accept: readonly C[],
  ): Promise<object | C> {
    const name = body.metadata!.name!;
    return this.request(
      `update ${kind} ${STORE_NAMESPACE}/${name}`,
      () => this.api.replaceNamespacedConfigMap({ name, namespace: STORE_NAMESPACE, body }),
      accept,
    );
  }

  /** Deletes an object; one that is gone already is fine. */
  private async remove(kind: Kind, name: string): Promise<void> {
    const params = { name, namespace: STORE_NAMESPACE };
    await this.request(
      `delete ${kind} ${STORE_NAMESPACE}/${name}`,
      () => (kind === 'Secret' ? this.api.deleteNamespacedSecret(params) : this.api.deleteNamespacedConfigMap(params)),
      [404],
    );
  }

  /** Runs one API request; an HTTP status in `accept` is returned, every other failure becomes a typed error. */
  private async request<T, C extends number = never>(
    what: string,
    fn: () => Promise<T>,
    accept: readonly C[] = [],
  ): Promise<T | C> {
    try {
      return await fn();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (isApiException(err) && (accept as readonly number[]).includes(code as number)) return code as C;
      throw this.failure(err, what);
    }
  }

  /** The typed error of a failed request. */
  private failure(err: unknown, what: string): Error {
    const server = `the Kubernetes API server at ${this.server}`;
    if (isApiException(err)) {
      const status = parseStatus(err.body);
      const detail = `${err.code}${status.reason ? ` ${status.reason}` : ''}${status.message ? `: ${status.message}` : ''}`;
      if (err.code === 401) {
        return new UserError(
          `${capitalize(server)} does not accept the credentials of ${this.source} (401 Unauthorized) to ${what}.`,
          {
            hint: "Its client certificate or token expired or belongs to another cluster. Use the cluster's admin kubeconfig: constellation-admin.conf in the workspace, /etc/kubernetes/admin.conf on a control-plane node.",
            cause: err,
          },
        );
      }
      if (err.code === 403) {
        return new UserError(
          `${capitalize(server)} does not allow the user of ${this.source} to ${what} (${detail}).`,
          {
            hint: "Use the cluster's admin kubeconfig (group system:masters), or allow this user to read and write ConfigMaps and Secrets in kube-system.",
            cause: err,
          },
        );
      }
      if (err.code >= 500 || err.code === 429)
        return new StoreUnavailableError(`${server} answered the request to ${what} with ${detail}`, { cause: err });
      return new UserError(`${capitalize(server)} refused to ${what}: ${detail}.`, { cause: err });
    }
    const { name, code, type } = err as { name?: string; code?: string; type?: string };
    if (name === 'AbortError' || type === 'aborted') {
      return new StoreUnavailableError(
        `${server} did not answer the request to ${what} within ${this.timeoutMs / 1000} s`,
        { cause: err },
      );
    }
    if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) {
      return new UserError(
        `${capitalize(server)} does not present a certificate that ${this.source} trusts (${code}).`,
        {
          hint: "The kubeconfig belongs to another cluster, or the address is not this cluster's API server.",
          cause: err,
        },
      );
    }
    if (name === 'FetchError' || typeof code === 'string') {
      const reason = code ?? (err as Error).message.split('\n')[0].slice(0, 200);
      return new StoreUnavailableError(`${server} could not be reached to ${what} (${reason})`, { cause: err });
    }
    return err as Error;
  }
}

/** An object of the store in kube-system with its label and data (no resourceVersion: creates and unconditional updates). */
function storeObject(
  name: string,
  role: 'join-secrets' | 'node-record' | 'disk-claim' | 'kubernetes-upgrade',
  data: Record<string, string>,
): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: STORE_NAMESPACE, labels: { [STORE_LABEL]: role } },
    data,
  };
}

/** prefix + id as an object name; a UserError when that is not a valid one (too long, or characters a name cannot have). */
function objectName(prefix: string, id: string, what: string): string {
  const name = `${prefix}${id}`;
  if (!OBJECT_NAME.test(name)) {
    throw new UserError(
      `${what} does not fit a Kubernetes object name (${prefix}<it> must be a lowercase DNS name of at most 253 characters).`,
    );
  }
  return name;
}

/** Adds the join entries found in an object's data (keys of other writers are left alone). */
function addEntries(
  entries: Map<string, string>,
  object: 'configmap' | 'secret',
  data: Record<string, string> | undefined,
): void {
  for (const [entry, place] of JOIN_ENTRY_PLACES) {
    const value = place.in === object ? data?.[place.key] : undefined;
    if (value !== undefined) entries.set(entry, value);
  }
}

function encodeSecretData(data: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(data).map(([key, value]) => [key, Buffer.from(value, 'utf8').toString('base64')]),
  );
}

function decodeSecretData(data: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );
}

interface ApiExceptionLike {
  code: number;
  body: unknown;
}

/** client-node's ApiException (HTTP status and the response body, a Status object as text). */
function isApiException(err: unknown): err is ApiExceptionLike {
  return typeof (err as { code?: unknown })?.code === 'number' && 'headers' in (err as object);
}

/** reason and message of a Kubernetes Status in a response body (they name objects and keys, never values). */
function parseStatus(body: unknown): { reason?: string; message?: string } {
  try {
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as {
      kind?: string;
      reason?: unknown;
      message?: unknown;
    };
    if (status?.kind !== 'Status') return {};
    return {
      reason: typeof status.reason === 'string' ? status.reason : undefined,
      message: typeof status.message === 'string' ? status.message.split('\n')[0].slice(0, 300) : undefined,
    };
  } catch {
    return {};
  }
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
