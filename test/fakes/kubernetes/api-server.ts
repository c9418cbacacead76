/**
 * A fake Kubernetes API server for tests: HTTPS on 127.0.0.1 with a serving certificate from the cluster CA (as
 * kubeadm's apiserver.crt), which the unmodified @kubernetes/client-node talks to with a kubeconfig. It serves
 * ConfigMaps and Secrets of core/v1 in namespaces, in memory, the way kube-apiserver does on the wire:
 *
 *   GET    /api/v1/namespaces/{ns}/{configmaps|secrets}[?labelSelector=]    a List (items without kind/apiVersion)
 *   POST   /api/v1/namespaces/{ns}/{resource}                               201; 409 AlreadyExists
 *   GET    /api/v1/namespaces/{ns}/{resource}/{name}                        200; 404 NotFound
 *   PUT    /api/v1/namespaces/{ns}/{resource}/{name}                        200; 404; 409 Conflict on a stale
 *          resourceVersion (none given: an unconditional update, which ConfigMaps and Secrets allow)
 *   PATCH  (merge-patch+json, strategic-merge-patch+json: as a JSON merge patch, which is what strategic merge
 *          does to these kinds' fields)                                     200; 404; 409
 *   DELETE (DeleteOptions preconditions honored)                           200 Status Success; 404
 *
 * Like the real server: one resourceVersion counter for all objects; an update that changes nothing keeps the
 * object's resourceVersion; names must be DNS-1123 subdomains and data keys match [-._a-zA-Z0-9]+ (422 Invalid);
 * data is limited to 1 MiB; a Secret's data is base64 (stringData is merged into it) and an immutable Secret's
 * data cannot change (422); every error is a Status object. Clients authenticate with a client certificate of the
 * cluster CA (user = CN, groups = O) or a bearer token; without either the answer is 401. Authorization: the group
 * system:masters may do everything, anyone else what `authorize` allows (default nothing: 403).
 *
 * `setAvailability` plays an API server that cannot answer: 'down' (the port refuses connections), 'hanging'
 * (requests are accepted and never answered) or 'etcd-no-quorum' (500 "etcdserver: request timed out", what
 * kube-apiserver answers when its etcd lost its quorum). Watches, server-side apply and JSON patches are not
 * served (400/415). Every request is logged (method, path, query) for assertions.
 */
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { ClusterPki } from '../../../lib/pki/cluster-pki.js';
import { issueServingCertificate } from './tls.js';

export type Resource = 'configmaps' | 'secrets';
export type Verb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'delete';
export type Availability = 'up' | 'down' | 'hanging' | 'etcd-no-quorum';

export interface UserInfo {
  name: string;
  groups: string[];
}

export interface LoggedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  user?: string;
  status: number;
}

export interface FakeKubernetesOptions {
  /** The cluster PKI: its CA signs the server's certificate and is the CA for client certificates. */
  pki: ClusterPki;
  /** Namespaces that exist; default default, kube-system, kube-public. */
  namespaces?: string[];
  /** Bearer tokens the server accepts, and whose they are. */
  tokens?: Record<string, UserInfo>;
  /** Whether a user outside system:masters may do this; default: never. */
  authorize?: (user: UserInfo, verb: Verb, resource: Resource, namespace: string, name?: string) => boolean;
}

/** A stored object as the server returns it. */
export type KubeObject = Record<string, unknown> & { metadata: Record<string, unknown> };

const KINDS: Record<Resource, string> = { configmaps: 'ConfigMap', secrets: 'Secret' };
const NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DATA_KEY = /^[-._a-zA-Z0-9]+$/;
const MAX_DATA_BYTES = 1024 * 1024;
const MAX_BODY_BYTES = 3 * 1024 * 1024;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const MASTERS = 'system:masters';

/** A Status error, as the API server sends it. */
class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string | undefined,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  toStatus(): Record<string, unknown> {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

export class FakeKubernetesApi {
  readonly requests: LoggedRequest[] = [];
  private readonly objects = new Map<string, KubeObject>();
  private readonly namespaces: Set<string>;
  private readonly sockets = new Set<Socket>();
  private readonly held = new Set<ServerResponse>();
  private revision = 1000;
  private availability: Availability = 'up';

  private constructor(
    private readonly server: https.Server,
    private readonly options: FakeKubernetesOptions,
    readonly port: number,
  ) {
    this.namespaces = new Set(options.namespaces ?? ['default', 'kube-system', 'kube-public']);
  }

  static async start(options: FakeKubernetesOptions): Promise<FakeKubernetesApi> {
    const server = https.createServer({
      ...tlsOf(options.pki),
      // Like kube-apiserver: a client certificate is asked for, and one that does not verify is not an identity.
      requestCert: true,
      rejectUnauthorized: false,
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const fake = new FakeKubernetesApi(server, options, (server.address() as AddressInfo).port);
    server.on('secureConnection', (socket: TLSSocket) => fake.track(socket));
    server.on('connection', (socket: Socket) => fake.track(socket));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void fake.handle(req, res));
    return fake;
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /**
   * From now on, serve with a certificate of this PKI's cluster CA and take its client certificates: the API server
   * that kubeadm init starts with the cluster's PKI (whose CA exists only once init made it).
   */
  useClusterPki(pki: ClusterPki): void {
    this.server.setSecureContext(tlsOf(pki));
  }

  /** Plays an API server that answers ('up') or one that cannot. */
  async setAvailability(mode: Availability): Promise<void> {
    const was = this.availability;
    this.availability = mode;
    if (mode !== 'hanging') this.releaseHeld();
    if (mode === 'down' && was !== 'down') {
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        for (const socket of this.sockets) socket.destroy();
      });
    }
    if (mode !== 'down' && was === 'down') {
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen(this.port, '127.0.0.1', () => {
          this.server.off('error', reject);
          resolve();
        });
      });
    }
  }

  /** A stored object (a copy), as a GET would return it; undefined when there is none. */
  object(resource: Resource, namespace: string, name: string): KubeObject | undefined {
    const stored = this.objects.get(key(resource, namespace, name));
    return stored ? structuredClone(stored) : undefined;
  }

  /** Deletes an object behind the clients' backs (as another writer would); whether there was one. */
  remove(resource: Resource, namespace: string, name: string): boolean {
    return this.objects.delete(key(resource, namespace, name));
  }

  /** The names of the stored objects of a resource in a namespace, sorted. */
  names(resource: Resource, namespace: string): string[] {
    const prefix = key(resource, namespace, '');
    return [...this.objects.keys()]
      .filter((k) => k.startsWith(prefix))
      .map((k) => k.slice(prefix.length))
      .sort();
  }

  async close(): Promise<void> {
    this.releaseHeld();
    if (this.availability === 'down') return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private releaseHeld(): void {
    for (const res of this.held) res.destroy();
    this.held.clear();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const logged: LoggedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      status: 0,
    };
    this.requests.push(logged);
    let status = 500;
    let body: unknown;
    try {
      const text = await readBody(req);
      if (this.availability === 'hanging') {
        this.held.add(res);
        res.once('close', () => this.held.delete(res));
        return;
      }
      if (this.availability === 'etcd-no-quorum')
        throw new StatusError(500, undefined, 'etcdserver: request timed out');
      const user = this.authenticate(req);
      logged.user = user.name;
      ({ status, body } = this.serve(req.method ?? 'GET', url, text, user, req.headers['content-type'] ?? ''));
    } catch (err) {
      const error =
        err instanceof StatusError
          ? err
          : new StatusError(500, 'InternalError', `Internal error occurred: ${(err as Error).message}`);
      status = error.code;
      body = error.toStatus();
    }
    logged.status = status;
    const payload = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    res.end(payload);
  }

  private authenticate(req: IncomingMessage): UserInfo {
    const socket = req.socket as TLSSocket;
    if (socket.authorized) {
      const subject = socket.getPeerCertificate().subject as unknown as Record<string, string | string[] | undefined>;
      const cn = subject.CN;
      const o = subject.O;
      if (typeof cn === 'string') return { name: cn, groups: o === undefined ? [] : Array.isArray(o) ? o : [o] };
    }
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const user = bearer ? this.options.tokens?.[bearer] : undefined;
    if (user) return user;
    throw new StatusError(401, 'Unauthorized', 'Unauthorized');
  }

  private serve(
    method: string,
    url: URL,
    text: string,
    user: UserInfo,
    contentType: string,
  ): { status: number; body: unknown } {
    const match = /^\/api\/v1\/namespaces\/([^/]+)\/(configmaps|secrets)(?:\/([^/]+))?$/.exec(url.pathname);
    if (!match) throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    const [, namespace, resource, name] = match as unknown as [string, string, Resource, string | undefined];
    const verb = verbOf(method, name);
    if (!verb)
      throw new StatusError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    if (!user.groups.includes(MASTERS) && !this.options.authorize?.(user, verb, resource, namespace, name)) {
      const scope = name ? `${resource} "${name}"` : resource;
      throw new StatusError(
        403,
        'Forbidden',
        `${scope} is forbidden: User "${user.name}" cannot ${verb} resource "${resource}" in API group "" in the namespace "${namespace}"`,
        { ...(name ? { name } : {}), kind: resource },
      );
    }
    if (url.searchParams.get('watch') === 'true')
      throw new StatusError(400, 'BadRequest', 'the fake API server serves no watches');
    switch (verb) {
      case 'list':
        return { status: 200, body: this.list(resource, namespace, url.searchParams.get('labelSelector') ?? '') };
      case 'get':
        return { status: 200, body: this.get(resource, namespace, name!) };
      case 'create':
        return { status: 201, body: this.create(resource, namespace, parseBody(text)) };
      case 'update':
        return { status: 200, body: this.update(resource, namespace, name!, parseBody(text)) };
      case 'patch':
        return { status: 200, body: this.patch(resource, namespace, name!, text, contentType) };
      case 'delete':
        return { status: 200, body: this.delete(resource, namespace, name!, text) };
    }
  }

  private list(resource: Resource, namespace: string, selector: string): unknown {
    const matches = labelSelector(selector);
    const prefix = key(resource, namespace, '');
    const items = [...this.objects]
      .filter(
        ([k, object]) => k.startsWith(prefix) && matches((object.metadata.labels ?? {}) as Record<string, string>),
      )
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([, object]) => {
        const { kind: _kind, apiVersion: _apiVersion, ...item } = structuredClone(object);
        return item;
      });
    return {
      kind: `${KINDS[resource]}List`,
      apiVersion: 'v1',
      metadata: { resourceVersion: String(this.revision) },
      items,
    };
  }

  private get(resource: Resource, namespace: string, name: string): KubeObject {
    const stored = this.objects.get(key(resource, namespace, name));
    if (!stored) throw notFound(resource, name);
    return structuredClone(stored);
  }

  private create(resource: Resource, namespace: string, body: KubeObject): KubeObject {
    if (!this.namespaces.has(namespace))
      throw new StatusError(404, 'NotFound', `namespaces "${namespace}" not found`, {
        name: namespace,
        kind: 'namespaces',
      });
    const object = this.normalize(resource, namespace, body);
    const name = object.metadata.name as string;
    if (object.metadata.resourceVersion)
      throw new StatusError(
        500,
        'InternalError',
        'Internal error occurred: resourceVersion should not be set on objects to be created',
      );
    if (this.objects.has(key(resource, namespace, name))) {
      throw new StatusError(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource });
    }
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    object.metadata.resourceVersion = String(++this.revision);
    this.objects.set(key(resource, namespace, name), object);
    return structuredClone(object);
  }

  private update(resource: Resource, namespace: string, name: string, body: KubeObject): KubeObject {
    const stored = this.objects.get(key(resource, namespace, name));
    if (!stored) throw notFound(resource, name);
    const bodyName = (body.metadata as { name?: unknown } | undefined)?.name;
    if (bodyName !== name)
      throw new StatusError(
        400,
        'BadRequest',
        `the name of the object (${String(bodyName)}) does not match the name on the URL (${name})`,
      );
    const object = this.normalize(resource, namespace, body);
    const expected = object.metadata.resourceVersion;
    if (expected !== undefined && expected !== '' && expected !== stored.metadata.resourceVersion)
      throw conflict(resource, name);
    if (stored.immutable === true) {
      const kind = KINDS[resource];
      if (object.immutable !== true)
        throw invalid(kind, name, 'immutable: Forbidden: field is immutable when `immutable` is set');
      if (!sameJson(object.data, stored.data) || !sameJson(object.binaryData, stored.binaryData)) {
        throw invalid(kind, name, 'data: Forbidden: field is immutable when `immutable` is set');
      }
    }
    // Set by the server only.
    object.metadata.uid = stored.metadata.uid;
    object.metadata.creationTimestamp = stored.metadata.creationTimestamp;
    object.metadata.resourceVersion = stored.metadata.resourceVersion;
    // An update that changes nothing is not written: the resourceVersion stays.
    if (sameJson(object, stored)) return structuredClone(stored);
    object.metadata.resourceVersion = String(++this.revision);
    this.objects.set(key(resource, namespace, name), object);
    return structuredClone(object);
  }

  private patch(resource: Resource, namespace: string, name: string, text: string, contentType: string): KubeObject {
    const type = contentType.split(';')[0].trim();
    if (type !== 'application/merge-patch+json' && type !== 'application/strategic-merge-patch+json') {
      throw new StatusError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json (the fake serves no ${type})`,
      );
    }
    const stored = this.get(resource, namespace, name);
    const patched = mergePatch(stored, parseBody(text)) as KubeObject;
    return this.update(resource, namespace, name, patched);
  }

  private delete(resource: Resource, namespace: string, name: string, text: string): unknown {
    const stored = this.objects.get(key(resource, namespace, name));
    if (!stored) throw notFound(resource, name);
    const options = text.trim()
      ? (parseBody(text) as { preconditions?: { resourceVersion?: string; uid?: string } })
      : {};
    const pre = options.preconditions;
    if (
      (pre?.resourceVersion && pre.resourceVersion !== stored.metadata.resourceVersion) ||
      (pre?.uid && pre.uid !== stored.metadata.uid)
    ) {
      throw conflict(resource, name);
    }
    this.objects.delete(key(resource, namespace, name));
    this.revision++;
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Success',
      details: { name, kind: resource, uid: stored.metadata.uid },
    };
  }

  /** The object as it would be stored: kind checked, namespace set, validated; server fields taken from the body. */
  private normalize(resource: Resource, namespace: string, body: KubeObject): KubeObject {
    const kind = KINDS[resource];
    if (typeof body !== 'object' || body === null || typeof body.metadata !== 'object' || body.metadata === null) {
      throw new StatusError(400, 'BadRequest', `Object '${kind}' is missing 'metadata'`);
    }
    if (body.kind !== undefined && body.kind !== kind)
      throw new StatusError(
        400,
        'BadRequest',
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (v1)`,
      );
    const object = structuredClone(body);
    object.kind = kind;
    object.apiVersion = 'v1';
    const name = object.metadata.name;
    if (object.metadata.namespace !== undefined && object.metadata.namespace !== namespace) {
      throw new StatusError(
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    object.metadata.namespace = namespace;
    if (typeof name !== 'string' || name === '')
      throw invalid(kind, '', 'metadata.name: Required value: name or generateName is required');
    if (!NAME.test(name)) {
      throw invalid(
        kind,
        name,
        `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      );
    }
    delete object.metadata.managedFields;
    if (resource === 'secrets') {
      const data = { ...((object.data ?? {}) as Record<string, unknown>) };
      for (const [k, value] of Object.entries(data)) {
        if (typeof value !== 'string' || !BASE64.test(value))
          throw new StatusError(
            400,
            'BadRequest',
            `Secret in version "v1" cannot be handled as a Secret: illegal base64 data in data[${k}]`,
          );
      }
      for (const [k, value] of Object.entries((object.stringData ?? {}) as Record<string, unknown>))
        data[k] = Buffer.from(String(value), 'utf8').toString('base64');
      delete object.stringData;
      object.data = data;
      object.type ??= 'Opaque';
    }
    const data = (object.data ?? {}) as Record<string, string>;
    const binary = (object.binaryData ?? {}) as Record<string, string>;
    let bytes = 0;
    for (const [k, value] of [...Object.entries(data), ...Object.entries(binary)]) {
      if (!DATA_KEY.test(k) || k.length > 253) {
        throw invalid(
          kind,
          name,
          `data[${k}]: Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
        );
      }
      if (k in data && k in binary)
        throw invalid(kind, name, `data[${k}]: Invalid value: "${k}": duplicate of key present in binaryData`);
      bytes += k.length + (resource === 'secrets' ? Buffer.from(value, 'base64').length : Buffer.byteLength(value));
    }
    if (bytes > MAX_DATA_BYTES) throw invalid(kind, name, `[]: Too long: must have at most ${MAX_DATA_BYTES} bytes`);
    return object;
  }
}

function tlsOf(pki: ClusterPki): { cert: string; key: string; ca: string } {
  const serving = issueServingCertificate(pki, { ips: ['127.0.0.1'], dns: ['localhost', 'kubernetes'] });
  return { cert: serving.cert, key: serving.key, ca: pki.files['ca.crt'] };
}

function key(resource: Resource, namespace: string, name: string): string {
  return `${resource}/${namespace}/${name}`;
}

function verbOf(method: string, name: string | undefined): Verb | undefined {
  if (name === undefined) return method === 'GET' ? 'list' : method === 'POST' ? 'create' : undefined;
  return ({ GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' } as Record<string, Verb>)[method];
}

function notFound(resource: Resource, name: string): StatusError {
  return new StatusError(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource });
}

function conflict(resource: Resource, name: string): StatusError {
  return new StatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    {
      name,
      kind: resource,
    },
  );
}

function invalid(kind: string, name: string, cause: string): StatusError {
  return new StatusError(422, 'Invalid', `${kind} "${name}" is invalid: ${cause}`, { name, kind });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new StatusError(413, 'RequestEntityTooLarge', 'the request body is too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseBody(text: string): KubeObject {
  try {
    return JSON.parse(text) as KubeObject;
  } catch {
    throw new StatusError(400, 'BadRequest', 'the request body is not JSON');
  }
}

/** Equality-based label selectors: k=v, k==v, k!=v, k, !k, joined by commas (all must hold). */
function labelSelector(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((term) => {
      const m = /^(!?)([^=!]+?)(?:\s*(==|=|!=)\s*(.*))?$/.exec(term);
      if (!m) throw new StatusError(400, 'BadRequest', `unable to parse requirement: ${term}`);
      const [, not, k, op, v] = m;
      if (!op) return (labels: Record<string, string>) => k in labels !== (not === '!');
      return (labels: Record<string, string>) => (op === '!=' ? labels[k] !== v : labels[k] === v);
    });
  return (labels) => terms.every((t) => t(labels));
}

/** RFC 7386. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, value] of Object.entries(patch)) {
    if (value === null) delete out[k];
    else out[k] = mergePatch(out[k], value);
  }
  return out;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a ?? {})) === JSON.stringify(canonical(b ?? {}));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
  );
}
