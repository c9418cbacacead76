/**
 * The Compute API as the provider uses it: the official @google-cloud/compute clients (REST transport of
 * google-gax), loaded on first use, wrapped in a small generic layer keyed by resource kind (one table below
 * says which client, scope, path and request field a kind has), with retries of throttled calls, waiting for
 * zone/region/global operations, and credential errors turned into UserErrors naming what to set.
 * Resource ids are the relative resource paths GCP itself uses in references
 * (`projects/P/global/networks/N`, `projects/P/regions/R/subnetworks/N`, `projects/P/zones/Z/...`).
 */
import type { protos } from '@google-cloud/compute';
import { GcpCredentialsError, GcpOperationError, isNotFound, isNotReady, isRetryable, toUserError } from './errors.js';
import { DEFAULT_RETRY, type GcpProviderOptions } from './options.js';
import { withRetry, type RetryPolicy } from './retry.js';

/** Attempts of an insert GCP refuses with resourceNotReady (at least; the retry policy's attempts if more). */
const NOT_READY_ATTEMPTS = 20;

export type Operation = protos.google.cloud.compute.v1.IOperation;
export type GcpResource = Record<string, unknown> & { name?: string | null; selfLink?: string | null };

export type GcpKind =
  | 'network'
  | 'subnetwork'
  | 'router'
  | 'firewall'
  | 'globalAddress'
  | 'healthCheck'
  | 'backendService'
  | 'targetTcpProxy'
  | 'globalForwardingRule'
  | 'instanceTemplate'
  | 'instanceGroupManager'
  // The regional passthrough load balancer of clusters made before the global TCP proxy: terminate still knows them.
  | 'address'
  | 'regionHealthCheck'
  | 'regionBackendService'
  | 'forwardingRule';

type Scope = 'global' | 'region' | 'zone';

interface KindSpec {
  scope: Scope;
  /** Collection in the resource path. */
  collection: string;
  /** @google-cloud/compute client class. */
  client: string;
  /** Request field naming the resource (get/delete) and carrying its body (insert). */
  param: string;
  bodyParam: string;
  /** For messages: "network", "health check", ... */
  label: string;
}

export const KINDS: Record<GcpKind, KindSpec> = {
  network: {
    scope: 'global',
    collection: 'networks',
    client: 'NetworksClient',
    param: 'network',
    bodyParam: 'networkResource',
    label: 'network',
  },
  subnetwork: {
    scope: 'region',
    collection: 'subnetworks',
    client: 'SubnetworksClient',
    param: 'subnetwork',
    bodyParam: 'subnetworkResource',
    label: 'subnetwork',
  },
  router: {
    scope: 'region',
    collection: 'routers',
    client: 'RoutersClient',
    param: 'router',
    bodyParam: 'routerResource',
    label: 'router with Cloud NAT',
  },
  firewall: {
    scope: 'global',
    collection: 'firewalls',
    client: 'FirewallsClient',
    param: 'firewall',
    bodyParam: 'firewallResource',
    label: 'firewall rule',
  },
  globalAddress: {
    scope: 'global',
    collection: 'addresses',
    client: 'GlobalAddressesClient',
    param: 'address',
    bodyParam: 'addressResource',
    label: 'global IP address',
  },
  healthCheck: {
    scope: 'global',
    collection: 'healthChecks',
    client: 'HealthChecksClient',
    param: 'healthCheck',
    bodyParam: 'healthCheckResource',
    label: 'health check',
  },
  backendService: {
    scope: 'global',
    collection: 'backendServices',
    client: 'BackendServicesClient',
    param: 'backendService',
    bodyParam: 'backendServiceResource',
    label: 'backend service',
  },
  targetTcpProxy: {
    scope: 'global',
    collection: 'targetTcpProxies',
    client: 'TargetTcpProxiesClient',
    param: 'targetTcpProxy',
    bodyParam: 'targetTcpProxyResource',
    label: 'target TCP proxy',
  },
  globalForwardingRule: {
    scope: 'global',
    collection: 'forwardingRules',
    client: 'GlobalForwardingRulesClient',
    param: 'forwardingRule',
    bodyParam: 'forwardingRuleResource',
    label: 'global forwarding rule',
  },
  instanceTemplate: {
    scope: 'global',
    collection: 'instanceTemplates',
    client: 'InstanceTemplatesClient',
    param: 'instanceTemplate',
    bodyParam: 'instanceTemplateResource',
    label: 'instance template',
  },
  instanceGroupManager: {
    scope: 'zone',
    collection: 'instanceGroupManagers',
    client: 'InstanceGroupManagersClient',
    param: 'instanceGroupManager',
    bodyParam: 'instanceGroupManagerResource',
    label: 'managed instance group',
  },
  address: {
    scope: 'region',
    collection: 'addresses',
    client: 'AddressesClient',
    param: 'address',
    bodyParam: 'addressResource',
    label: 'IP address',
  },
  regionHealthCheck: {
    scope: 'region',
    collection: 'healthChecks',
    client: 'RegionHealthChecksClient',
    param: 'healthCheck',
    bodyParam: 'healthCheckResource',
    label: 'regional health check',
  },
  regionBackendService: {
    scope: 'region',
    collection: 'backendServices',
    client: 'RegionBackendServicesClient',
    param: 'backendService',
    bodyParam: 'backendServiceResource',
    label: 'regional backend service',
  },
  forwardingRule: {
    scope: 'region',
    collection: 'forwardingRules',
    client: 'ForwardingRulesClient',
    param: 'forwardingRule',
    bodyParam: 'forwardingRuleResource',
    label: 'forwarding rule',
  },
};

/** Journal kind of a resource kind ("gcp:network"). */
export const journalKind = (kind: GcpKind): string => `gcp:${kind}`;

export interface ResourceRef {
  kind: GcpKind;
  project: string;
  /** The region or zone for regional/zonal kinds. */
  location?: string;
  name: string;
}

export function refId(ref: ResourceRef): string {
  const spec = KINDS[ref.kind];
  const scope = spec.scope === 'global' ? 'global' : `${spec.scope === 'region' ? 'regions' : 'zones'}/${ref.location}`;
  return `projects/${ref.project}/${scope}/${spec.collection}/${ref.name}`;
}

const ID_PATTERN = /projects\/([^/]+)\/(?:global|(regions|zones)\/([^/]+))\/([^/]+)\/([^/?]+)/;

/** Parses an id or a self link ("https://.../compute/v1/projects/..."); undefined for other kinds. */
export function parseRefId(id: string): ResourceRef | undefined {
  const m = ID_PATTERN.exec(id);
  if (!m) return undefined;
  const [, project, scopeWord, location, collection, name] = m;
  const scope: Scope = scopeWord === 'regions' ? 'region' : scopeWord === 'zones' ? 'zone' : 'global';
  const kind = (Object.keys(KINDS) as GcpKind[]).find(
    (k) => KINDS[k].collection === collection && KINDS[k].scope === scope,
  );
  return kind ? { kind, project: project!, location, name: name! } : undefined;
}

/** The last path segment of a GCP URL (zone, region, machine type ...). */
export const lastSegment = (url: string | null | undefined): string => (url ?? '').split('/').pop() ?? '';

/** The part of an auth client the provider uses for the IAM and Resource Manager REST APIs. */
export interface RestAuthClient {
  request<T>(options: { url: string; method?: string; data?: unknown }): Promise<{ data: T }>;
}

interface CollectionClient {
  insert(request: object): Promise<[{ latestResponse?: unknown }, ...unknown[]]>;
  get(request: object): Promise<[unknown, ...unknown[]]>;
  delete(request: object): Promise<[{ latestResponse?: unknown }, ...unknown[]]>;
  list(request: object): Promise<[unknown[], ...unknown[]]>;
}

type ComputeModule = typeof import('@google-cloud/compute');
type AnyClient = { auth: unknown };

/** What a call needs besides its request: the abort signal of the run. */
export interface CallContext {
  signal?: AbortSignal;
}

/**
 * Clients per connection (endpoint, credentials), shared by every GcpCompute of the process: making one costs
 * tens of milliseconds of CPU (the Compute protos are large), and they hold no per-call state.
 */
const sharedClients = new Map<string, Map<string, AnyClient>>();
const authClientIds = new WeakMap<object, number>();
let nextAuthClientId = 1;

function connectionKey(clientOptions: Record<string, unknown>): string {
  const { authClient, ...rest } = clientOptions;
  let authId: number | undefined;
  if (authClient && typeof authClient === 'object') {
    if (!authClientIds.has(authClient)) authClientIds.set(authClient, nextAuthClientId++);
    authId = authClientIds.get(authClient);
  }
  return JSON.stringify({ ...rest, authId });
}

export class GcpCompute {
  private readonly clients: Map<string, AnyClient>;
  readonly retry: RetryPolicy;

  private constructor(
    private readonly compute: ComputeModule,
    private readonly clientOptions: Record<string, unknown>,
    private readonly options: GcpProviderOptions,
  ) {
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    const key = connectionKey(clientOptions);
    let clients = sharedClients.get(key);
    if (!clients) sharedClients.set(key, (clients = new Map()));
    this.clients = clients;
  }

  /** Loads the SDK. keyFilename (e.g. the config's serviceAccountKeyPath) is used when no auth client is given. */
  static async open(options: GcpProviderOptions, keyFilename?: string): Promise<GcpCompute> {
    const mod = (await import('@google-cloud/compute')) as ComputeModule & { default?: ComputeModule };
    const compute = mod.default ?? mod;
    const clientOptions: Record<string, unknown> = { fallback: true };
    if (options.apiEndpoint) clientOptions.apiEndpoint = options.apiEndpoint;
    if (options.port) clientOptions.port = options.port;
    if (options.protocol) clientOptions.protocol = options.protocol;
    if (options.authClient) clientOptions.authClient = options.authClient;
    else if (options.keyFilename ?? keyFilename) clientOptions.keyFilename = options.keyFilename ?? keyFilename;
    return new GcpCompute(compute, clientOptions, options);
  }

  /** One client per class, made on first use. */
  client<T = AnyClient>(className: string): T {
    let client = this.clients.get(className);
    if (!client) {
      const Ctor = (this.compute as unknown as Record<string, new (opts: object) => AnyClient>)[className];
      if (!Ctor) throw new Error(`@google-cloud/compute has no ${className}`);
      client = new Ctor({ ...this.clientOptions });
      this.clients.set(className, client);
    }
    return client as T;
  }

  /** Makes and initializes (stub, credentials) the clients the kinds and their operations need, concurrently. */
  async prepare(kinds: GcpKind[]): Promise<void> {
    const names = new Set([
      ...kinds.map((k) => KINDS[k].client),
      'ZoneOperationsClient',
      'RegionOperationsClient',
      'GlobalOperationsClient',
    ]);
    await Promise.all([...names].map((n) => this.client<{ initialize(): Promise<unknown> }>(n).initialize()));
  }

  /** The auth client every call uses: the given one, or the one application default credentials yield. */
  async authClient(): Promise<RestAuthClient> {
    if (this.options.authClient) return this.options.authClient as RestAuthClient;
    const auth = this.client('NetworksClient').auth as { getClient(): Promise<RestAuthClient> };
    try {
      return await auth.getClient();
    } catch (err) {
      const keyFile = this.clientOptions.keyFilename;
      if (typeof keyFile === 'string') {
        throw new GcpCredentialsError(
          `The service-account key file ${keyFile} cannot be used: ${(err as Error).message}`,
          err,
        );
      }
      throw toUserError('Loading the Google credentials', err);
    }
  }

  /** Fails early, with a UserError naming what to set, when no credentials are found. */
  async checkCredentials(): Promise<void> {
    await this.authClient();
  }

  /** Runs one API call with retries of throttled calls; errors become UserErrors saying what we were doing. */
  async call<T>(action: string, fn: () => Promise<T>, ctx: CallContext = {}): Promise<T> {
    try {
      return await withRetry(() => abortable(fn(), ctx.signal), this.retry, { signal: ctx.signal });
    } catch (err) {
      if (ctx.signal?.aborted && err === ctx.signal.reason) throw err;
      throw toUserError(action, err);
    }
  }

  /** Like call(), but the raw error (for callers that react to not-found or already-exists). */
  async rawCall<T>(fn: () => Promise<T>, ctx: CallContext = {}): Promise<T> {
    return withRetry(() => abortable(fn(), ctx.signal), this.retry, { signal: ctx.signal });
  }

  private collection(kind: GcpKind): CollectionClient {
    return this.client<CollectionClient>(KINDS[kind].client);
  }

  private request(ref: ResourceRef): Record<string, unknown> {
    const spec = KINDS[ref.kind];
    const request: Record<string, unknown> = { project: ref.project, [spec.param]: ref.name };
    if (spec.scope !== 'global') request[spec.scope] = ref.location;
    return request;
  }

  /** Sends the insert; resolves with the operation as soon as GCP accepted it (raw errors: callers react to 409). */
  async insert(ref: ResourceRef, body: object, ctx: CallContext = {}): Promise<Operation> {
    const spec = KINDS[ref.kind];
    const request = { ...this.request(ref), [spec.bodyParam]: { ...body, name: ref.name } };
    delete request[spec.param];
    // resourceNotReady (another change to the same network runs) is worth more patience than throttling.
    const patient = { ...this.retry, attempts: Math.max(this.retry.attempts, NOT_READY_ATTEMPTS) };
    const [lro] = await withRetry(() => abortable(this.collection(ref.kind).insert(request), ctx.signal), patient, {
      signal: ctx.signal,
      retryable: (err) => isNotReady(err) || isRetryable(err),
    });
    return lro.latestResponse as Operation;
  }

  /** The resource, or undefined when it does not exist. */
  async get(ref: ResourceRef, ctx: CallContext = {}): Promise<GcpResource | undefined> {
    try {
      const [resource] = await this.rawCall(() => this.collection(ref.kind).get(this.request(ref)), ctx);
      return resource as GcpResource;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw toUserError(`Reading ${KINDS[ref.kind].label} ${ref.name}`, err);
    }
  }

  /** Sends the delete; undefined when the resource is already gone (raw errors: callers react to "in use"). */
  async delete(ref: ResourceRef, ctx: CallContext = {}): Promise<Operation | undefined> {
    try {
      const [lro] = await this.rawCall(() => this.collection(ref.kind).delete(this.request(ref)), ctx);
      return lro.latestResponse as Operation;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Every resource of a kind in a project (and region/zone). */
  async list(
    kind: GcpKind,
    project: string,
    location: string | undefined,
    ctx: CallContext = {},
  ): Promise<GcpResource[]> {
    const spec = KINDS[kind];
    const request: Record<string, unknown> = { project };
    if (spec.scope !== 'global') request[spec.scope] = location;
    const [items] = await this.call(`Listing ${spec.label}s`, () => this.collection(kind).list(request), ctx);
    return items as GcpResource[];
  }

  /**
   * Waits until the operation is DONE, with the operations' `wait` method (it blocks on GCP's side until the
   * operation finishes or about two minutes pass, so no polling interval adds latency). Throws
   * GcpOperationError with GCP's codes and messages when the operation failed.
   */
  async waitForOperation(op: Operation, project: string, ctx: CallContext = {}): Promise<void> {
    let current = op;
    while (current.status !== 'DONE') {
      const name = current.name ?? '';
      const zone = lastSegment(current.zone);
      const region = lastSegment(current.region);
      const action = `Waiting for operation ${name}`;
      if (zone) {
        const ops = this.client<{ wait(r: object): Promise<[Operation]> }>('ZoneOperationsClient');
        [current] = await this.call(action, () => ops.wait({ project, zone, operation: name }), ctx);
      } else if (region) {
        const ops = this.client<{ wait(r: object): Promise<[Operation]> }>('RegionOperationsClient');
        [current] = await this.call(action, () => ops.wait({ project, region, operation: name }), ctx);
      } else {
        const ops = this.client<{ wait(r: object): Promise<[Operation]> }>('GlobalOperationsClient');
        [current] = await this.call(action, () => ops.wait({ project, operation: name }), ctx);
      }
    }
    const errors = current.error?.errors ?? [];
    if (errors.length > 0) {
      const message = errors.map((e) => e.message ?? e.code ?? 'unknown error').join('; ');
      throw new GcpOperationError(message, current.httpErrorStatusCode ?? undefined, errors[0]?.code ?? undefined);
    }
  }
}

/** Settles with the promise, or rejects with the signal's reason as soon as it aborts. */
function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
