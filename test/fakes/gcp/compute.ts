/**
 * The fake Compute Engine API (REST, /compute/v1): keeps resources per project and scope, checks references
 * (an insert naming a missing resource gets 404, deleting a resource another one uses gets 400
 * resourceInUseByAnotherResource, a duplicate name 409 alreadyExists), and emulates zone/region/global
 * operations that finish after a fixed time, including `wait`. A managed instance group makes its instance
 * group and instances from its template (labels, metadata, disks, confidential settings carried over), and
 * resizes, deletes and recreates them; a stateful policy keeps a recreated instance's preserved disks and
 * internal IP, as GCP does. Operation faults make an accepted insert finish with an error (quota).
 *
 * What the real API does and the provider has to cope with, each as its reference page says:
 *   - an insert that refers to a network while another operation on that network still runs is refused with 400
 *     resourceNotReady (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-errors,
 *     "resource not ready": concurrent changes to one network), so inserts of a new network's subnets, routes and
 *     firewalls must be retried;
 *   - `resize` is DONE "when the resize actions are scheduled even if the group has not yet added or deleted any
 *     instances"; new instances stay PROVISIONING (currentAction CREATING) for `instanceBootMs`; when resizing down,
 *     "the instance group arbitrarily chooses the order in which VMs are deleted", taking into account the VM's
 *     status and its template version (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/resize):
 *     here instances not RUNNING go first, then those on an older template, then a random one;
 *   - `deleteInstances` "reduces the targetSize of the managed instance group by the number of instances that you
 *     delete" (.../instanceGroupManagers/deleteInstances); `createInstances` adds named instances and raises it
 *     (.../createInstances); `abandonInstances` takes instances out of the group, which keeps running them, and
 *     lowers it (.../abandonInstances); `setInstanceTemplate` applies to instances made afterwards only;
 *   - `instances.setMetadata` needs the current metadata fingerprint (412 conditionNotMet otherwise,
 *     .../instances/setMetadata).
 *
 * connect(ip, port) models the data path of GCP's load balancers, so a test can tell whether a client of the
 * cluster endpoint reaches a node: a global forwarding rule hands the connection to its target TCP proxy, whose
 * backend service picks a healthy instance of its groups through the groups' named port (the backend service's
 * portName, "http" when unset) and opens a new connection from Google's front ends (130.211.0.0/22) to the
 * instance's own IP, if a firewall rule lets that source reach the port. A regional passthrough forwarding rule
 * (backendService, no proxy) delivers the packet unchanged, addressed to the load balancer's IP: a node without
 * Google's guest agent has no local route for it and drops it.
 */
import { randomBytes } from 'node:crypto';
import { InjectedErrors } from '../injected.js';
import { HttpError, json, type FakeRequest, type FakeResponse } from './http.js';

type Json = Record<string, unknown>;

interface Stored {
  key: string;
  collection: string;
  resource: Json;
  /** Keys of resources this one refers to. */
  refs: Set<string>;
}

interface FakeOperation {
  op: Json;
  project: string;
  scope: string;
  doneAt: number;
  error?: { code: string; message: string; status: number };
  /** State changes that happen when the operation finishes. */
  onDone?: () => void;
  /** The network (resource key) this operation changes, while it runs (see resourceNotReady in the header). */
  network?: string;
}

export interface OperationFault {
  /** Matched against "POST /compute/v1/projects/...". */
  match: RegExp;
  code: string;
  message: string;
  status?: number;
  times?: number;
}

export interface ShieldedIdentity {
  ekCert?: string;
  ekPub?: string;
}

const COLLECTIONS = new Set([
  'networks',
  'subnetworks',
  'routers',
  'firewalls',
  'addresses',
  'healthChecks',
  'backendServices',
  'forwardingRules',
  'instanceTemplates',
  'instanceGroupManagers',
  'instanceGroups',
  'instances',
  'targetTcpProxies',
]);

/** Inserts that change the network they name (see resourceNotReady in the header). */
const NETWORK_CHANGES = new Set(['subnetworks', 'routers', 'firewalls']);

/** Where a connection to the load balancer ended up (see the module header). */
export interface Delivery {
  instance: string;
  /** The address and port the node sees the connection arrive on. */
  destinationIp: string;
  destinationPort: number;
  sourceIp: string;
  /** Whether the node accepts it: only packets for one of its own addresses. */
  accepted: boolean;
}

/** Google's front ends, where TCP proxies and health checks connect from. */
const FRONT_END_IP = '130.211.0.7';

const REF_PATTERN = /projects\/[^/]+\/(?:global|regions\/[^/]+|zones\/[^/]+)\/([A-Za-z]+)\/[^/?]+$/;

export class FakeCompute {
  readonly resources = new Map<string, Stored>();
  private readonly operations = new Map<string, FakeOperation>();
  private readonly operationFaults: OperationFault[] = [];
  private readonly shielded = new Map<string, ShieldedIdentity>();
  private counter = 0;
  private nextIp = 10;
  /** How long a new instance stays PROVISIONING (see the header). */
  instanceBootMs = 0;
  /** When each PROVISIONING instance (by key) becomes RUNNING. */
  private readonly booting = new Map<string, number>();
  /** How many inserts were refused with resourceNotReady. */
  notReadyRefusals = 0;
  /**
   * What the fake answered on purpose, per kind: resourceNotReady, injected HTTP faults (by the server), and
   * "PROVISIONING" for each answer that showed an instance still PROVISIONING (see the header).
   */
  readonly injected = new InjectedErrors();
  /** Picks resize-down victims among equals; tests may replace it (default: random, as "arbitrarily"). */
  random: () => number = Math.random;

  constructor(
    private readonly baseUrl: () => string,
    private readonly operationMs: () => number,
    private readonly waitTimeoutMs: number,
    private readonly ips: { privateIpBase?: string; publicIpBase?: string } = {},
  ) {}

  reset(): void {
    this.resources.clear();
    this.operations.clear();
    this.operationFaults.length = 0;
    this.shielded.clear();
    this.booting.clear();
    this.instanceBootMs = 0;
    this.notReadyRefusals = 0;
    this.injected.reset();
    this.random = Math.random;
  }

  /** Instances whose boot time passed become RUNNING. */
  private tick(): void {
    const now = Date.now();
    for (const [key, readyAt] of this.booting) {
      if (readyAt > now) continue;
      this.booting.delete(key);
      const stored = this.resources.get(key);
      if (stored) stored.resource.status = 'RUNNING';
    }
  }

  failOperation(fault: OperationFault): void {
    this.operationFaults.push({ times: 1, ...fault });
  }

  setShieldedIdentity(instanceName: string, identity: ShieldedIdentity): void {
    this.shielded.set(instanceName, identity);
  }

  /** Resources of a collection (all when omitted), as GCP would return them. */
  list(collection?: string): Json[] {
    return [...this.resources.values()]
      .filter((s) => !collection || s.collection === collection)
      .map((s) => s.resource);
  }

  async handle(req: FakeRequest): Promise<FakeResponse | undefined> {
    const m = /^\/compute\/v1\/projects\/([^/]+)\/(.*)$/.exec(req.path);
    if (!m) return undefined;
    this.tick();
    const project = m[1]!;
    const rest = m[2]!.split('/');
    if (rest[0] === 'aggregated' && rest[1] === 'instances' && req.method === 'GET')
      return this.aggregatedInstances(project, req);

    // Scope: global | regions/R | zones/Z
    const scope = rest[0] === 'global' ? 'global' : `${rest[0]}/${rest[1]}`;
    const tail = rest.slice(scope === 'global' ? 1 : 2);
    const [collection, name, verb] = tail;
    if (collection === 'operations' && name) return this.operation(project, scope, name, verb === 'wait');
    if (!collection || !COLLECTIONS.has(collection))
      throw new HttpError(404, `Unknown collection ${collection}`, 'notFound');
    const key = `projects/${project}/${scope}/${collection}/${name ?? ''}`;

    if (!name) {
      if (req.method === 'GET')
        return json({
          kind: `compute#${collection}List`,
          items: this.served(this.filtered(project, scope, collection, req.query.get('filter'))),
        });
      if (req.method === 'POST') return this.insert(req, project, scope, collection, req.body as Json);
    } else if (!verb) {
      if (req.method === 'GET') return json(this.served([this.mustGet(key).resource])[0]);
      if (req.method === 'DELETE') return this.delete(project, scope, key);
    } else if (collection === 'instanceGroupManagers' && req.method === 'POST') {
      if (verb === 'resize') return this.resize(project, scope, key, Number(req.query.get('size')));
      if (verb === 'deleteInstances') return this.deleteInstances(project, scope, key, req.body as Json);
      if (verb === 'createInstances') return this.createInstances(project, scope, key, req.body as Json);
      if (verb === 'abandonInstances') return this.abandonInstances(project, scope, key, req.body as Json);
      if (verb === 'setInstanceTemplate') return this.setInstanceTemplate(project, scope, key, req.body as Json);
      if (verb === 'listManagedInstances') return this.listManaged(key);
    } else if (collection === 'instances' && verb === 'setMetadata' && req.method === 'POST') {
      return this.setMetadata(project, scope, key, req.body as Json);
    } else if (collection === 'instances' && verb === 'getShieldedInstanceIdentity' && req.method === 'GET') {
      this.mustGet(key);
      const identity = this.shielded.get(name) ?? {};
      return json({ kind: 'compute#shieldedInstanceIdentity', signingKey: identity, encryptionKey: identity });
    }
    throw new HttpError(404, `No route for ${req.method} ${req.path}`, 'notFound');
  }

  /** Resources about to be answered; counts the answer when it shows an instance still PROVISIONING. */
  private served(resources: Json[]): Json[] {
    if (resources.some((r) => r.kind === 'compute#instance' && r.status === 'PROVISIONING'))
      this.injected.hit('PROVISIONING');
    return resources;
  }

  private url(key: string): string {
    return `${this.baseUrl()}/compute/v1/${key}`;
  }

  private mustGet(key: string): Stored {
    const stored = this.resources.get(key);
    if (!stored) throw new HttpError(404, `The resource '${key}' was not found`, 'notFound');
    return stored;
  }

  private filtered(project: string, scope: string, collection: string, filter: string | null): Json[] {
    const prefix = `projects/${project}/${scope}/${collection}/`;
    return [...this.resources.values()]
      .filter((s) => s.key.startsWith(prefix) && matchesFilter(s.resource, filter))
      .map((s) => s.resource);
  }

  private aggregatedInstances(project: string, req: FakeRequest): FakeResponse {
    const items: Record<string, { instances: Json[] }> = {};
    for (const s of this.resources.values()) {
      const m = /^projects\/([^/]+)\/zones\/([^/]+)\/instances\//.exec(s.key);
      if (!m || m[1] !== project || !matchesFilter(s.resource, req.query.get('filter'))) continue;
      (items[`zones/${m[2]}`] ??= { instances: [] }).instances.push(s.resource);
    }
    this.served(Object.values(items).flatMap((i) => i.instances));
    return json({ kind: 'compute#instanceAggregatedList', items });
  }

  /** Keys of the known resources a body refers to; 404 for any that does not exist. */
  private references(body: unknown): Set<string> {
    const refs = new Set<string>();
    const walk = (v: unknown) => {
      if (typeof v === 'string') {
        const m = REF_PATTERN.exec(v);
        if (m && COLLECTIONS.has(m[1]!)) {
          const key = v.slice(v.indexOf('projects/'));
          if (!this.resources.has(key)) throw new HttpError(404, `The resource '${key}' was not found`, 'notFound');
          refs.add(key);
        }
      } else if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    walk(body);
    return refs;
  }

  private newOperation(
    project: string,
    scope: string,
    type: string,
    targetKey: string,
    fault?: OperationFault,
  ): FakeOperation {
    const name = `operation-${Date.now()}-${++this.counter}`;
    const scopeUrl =
      scope === 'global'
        ? {}
        : scope.startsWith('zones/')
          ? { zone: this.url(`projects/${project}/${scope}`) }
          : { region: this.url(`projects/${project}/${scope}`) };
    const op: FakeOperation = {
      project,
      scope,
      doneAt: Date.now() + this.operationMs(),
      op: {
        kind: 'compute#operation',
        id: String(1000 + this.counter),
        name,
        operationType: type,
        targetLink: this.url(targetKey),
        selfLink: this.url(`projects/${project}/${scope}/operations/${name}`),
        status: 'RUNNING',
        progress: 0,
        insertTime: new Date().toISOString(),
        ...scopeUrl,
      },
      ...(fault ? { error: { code: fault.code, message: fault.message, status: fault.status ?? 403 } } : {}),
    };
    this.operations.set(`${project}/${scope}/${name}`, op);
    return op;
  }

  private finish(op: FakeOperation): Json {
    if (op.op.status !== 'DONE' && Date.now() >= op.doneAt) {
      op.op.status = 'DONE';
      op.op.progress = 100;
      op.op.endTime = new Date().toISOString();
      if (op.error) {
        op.op.error = { errors: [{ code: op.error.code, message: op.error.message }] };
        op.op.httpErrorStatusCode = op.error.status;
        op.op.httpErrorMessage = op.error.code === 'QUOTA_EXCEEDED' ? 'FORBIDDEN' : 'ERROR';
      }
      op.onDone?.();
    }
    return { ...op.op };
  }

  private async operation(project: string, scope: string, name: string, wait: boolean): Promise<FakeResponse> {
    const op = this.operations.get(`${project}/${scope}/${name}`);
    if (!op)
      throw new HttpError(
        404,
        `The resource 'projects/${project}/${scope}/operations/${name}' was not found`,
        'notFound',
      );
    if (wait) {
      const until = Math.min(op.doneAt, Date.now() + this.waitTimeoutMs);
      const delay = until - Date.now();
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    }
    return json(this.finish(op));
  }

  /** The operation as the mutating call answers it (done at once when operations take no time). */
  private operationResponse(op: FakeOperation): FakeResponse {
    return json(this.finish(op));
  }

  private insert(req: FakeRequest, project: string, scope: string, collection: string, body: Json): FakeResponse {
    const name = String(body?.name ?? '');
    if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name))
      throw new HttpError(400, `Invalid value for field 'resource.name': '${name}'.`, 'invalid');
    const key = `projects/${project}/${scope}/${collection}/${name}`;
    if (this.resources.has(key)) throw new HttpError(409, `The resource '${key}' already exists`, 'alreadyExists');
    const refs = this.references(body);
    // Subnetworks, routers and firewalls change their network; instance templates and the rest only refer to it.
    const network = NETWORK_CHANGES.has(collection) ? [...refs].find((r) => /\/global\/networks\//.test(r)) : undefined;
    if (network) {
      const busy = [...this.operations.values()].find(
        (o) => o.network === network && o.op.status !== 'DONE' && Date.now() < o.doneAt,
      );
      if (busy) {
        this.notReadyRefusals++;
        this.injected.hit('resourceNotReady');
        throw new HttpError(400, `The resource '${network}' is not ready`, 'resourceNotReady');
      }
    }
    const fault = this.operationFaults.find((f) => (f.times ?? 1) > 0 && f.match.test(`${req.method} ${req.path}`));
    if (fault) fault.times = (fault.times ?? 1) - 1;
    const op = this.newOperation(project, scope, 'insert', key, fault);
    if (network) op.network = network;
    if (fault) return this.operationResponse(op);

    const resource: Json = {
      ...structuredClone(body),
      id: String(BigInt(Date.now()) * 1000n + BigInt(++this.counter)),
      creationTimestamp: new Date().toISOString(),
      selfLink: this.url(key),
    };
    if (collection === 'addresses')
      Object.assign(resource, {
        address: `${this.ips.publicIpBase ?? '203.0.113'}.${++this.nextIp % 250}`,
        status: 'RESERVED',
      });
    this.resources.set(key, { key, collection, resource, refs });
    if (collection === 'instanceGroupManagers') this.createGroup(project, scope, key, resource);
    return this.operationResponse(op);
  }

  private createGroup(project: string, scope: string, key: string, igm: Json): void {
    const groupKey = key.replace('/instanceGroupManagers/', '/instanceGroups/');
    const group = {
      kind: 'compute#instanceGroup',
      name: igm.name,
      selfLink: this.url(groupKey),
      namedPorts: igm.namedPorts ?? [],
    };
    this.resources.set(groupKey, { key: groupKey, collection: 'instanceGroups', resource: group, refs: new Set() });
    igm.instanceGroup = this.url(groupKey);
    for (let i = 0; i < Number(igm.targetSize ?? 0); i++) this.addInstance(project, scope, igm);
  }

  private members(igmKey: string): Stored[] {
    const igm = this.resources.get(igmKey);
    return [...this.resources.values()].filter(
      (s) => s.collection === 'instances' && s.resource.createdBy === igm?.resource.selfLink,
    );
  }

  private addInstance(
    project: string,
    scope: string,
    igm: Json,
    preserved: { name?: string; networkIP?: string; disks?: Record<string, string> } = {},
  ): string {
    const templateKey = String(igm.instanceTemplate).slice(String(igm.instanceTemplate).indexOf('projects/'));
    const props = (this.resources.get(templateKey)?.resource.properties ?? {}) as Json;
    const name = preserved.name ?? `${igm.baseInstanceName}-${randomBytes(2).toString('hex')}`;
    const diskUrl = (deviceName: unknown) =>
      preserved.disks?.[String(deviceName)] ??
      this.url(`projects/${project}/${scope}/disks/${name}-${String(deviceName)}-${randomBytes(3).toString('hex')}`);
    const key = `projects/${project}/${scope}/instances/${name}`;
    const nics = (props.networkInterfaces as Json[] | undefined) ?? [{}];
    const instance: Json = {
      kind: 'compute#instance',
      id: String(BigInt(Date.now()) * 1000n + BigInt(++this.counter)),
      name,
      zone: this.url(`projects/${project}/${scope}`),
      machineType: this.url(`projects/${project}/${scope}/machineTypes/${props.machineType}`),
      status: this.instanceBootMs > 0 ? 'PROVISIONING' : 'RUNNING',
      creationTimestamp: new Date().toISOString(),
      instanceTemplate: igm.instanceTemplate,
      labels: props.labels ?? {},
      metadata: { ...((props.metadata as Json | undefined) ?? {}), fingerprint: 'initial' },
      tags: props.tags ?? {},
      disks: ((props.disks as Json[] | undefined) ?? []).map((d, i) => ({
        deviceName: d.deviceName,
        boot: d.boot,
        index: i,
        diskSizeGb: (d.initializeParams as Json | undefined)?.diskSizeGb,
        source: diskUrl(d.deviceName),
      })),
      confidentialInstanceConfig: props.confidentialInstanceConfig,
      shieldedInstanceConfig: props.shieldedInstanceConfig,
      scheduling: props.scheduling,
      networkInterfaces: nics.map((nic) => ({
        ...nic,
        networkIP: preserved.networkIP ?? `${this.ips.privateIpBase ?? '192.168.178'}.${++this.nextIp % 250}`,
        name: 'nic0',
      })),
      createdBy: igm.selfLink,
      selfLink: this.url(key),
    };
    this.resources.set(key, { key, collection: 'instances', resource: instance, refs: new Set() });
    if (this.instanceBootMs > 0) this.booting.set(key, Date.now() + this.instanceBootMs);
    return key;
  }

  private delete(project: string, scope: string, key: string): FakeResponse {
    const stored = this.mustGet(key);
    const dependents = (k: string) => [...this.resources.values()].filter((s) => s.refs.has(k));
    const blocking = [
      ...dependents(key),
      ...(stored.collection === 'instanceGroupManagers'
        ? dependents(key.replace('/instanceGroupManagers/', '/instanceGroups/'))
        : []),
    ];
    if (blocking.length > 0) {
      throw new HttpError(
        400,
        `The resource '${key}' is already being used by '${blocking[0]!.key}'`,
        'resourceInUseByAnotherResource',
      );
    }
    if (stored.collection === 'instanceGroupManagers') {
      for (const member of this.members(key)) this.resources.delete(member.key);
      this.resources.delete(key.replace('/instanceGroupManagers/', '/instanceGroups/'));
    }
    this.resources.delete(key);
    this.booting.delete(key);
    // A managed instance deleted behind its group's back: the group keeps its target size and makes another one.
    if (stored.collection === 'instances' && stored.resource.createdBy) {
      const igm = [...this.resources.values()].find(
        (s) => s.collection === 'instanceGroupManagers' && s.resource.selfLink === stored.resource.createdBy,
      );
      if (igm) this.addInstance(project, scope, igm.resource);
    }
    return this.operationResponse(this.newOperation(project, scope, 'delete', key));
  }

  private resize(project: string, scope: string, key: string, size: number): FakeResponse {
    const igm = this.mustGet(key).resource;
    if (!Number.isInteger(size) || size < 0)
      throw new HttpError(400, `Invalid value for field 'size': '${size}'.`, 'invalid');
    const members = this.members(key);
    for (const victim of this.resizeVictims(members, igm, members.length - size)) this.resources.delete(victim.key);
    for (let i = members.length; i < size; i++) this.addInstance(project, scope, igm);
    igm.targetSize = size;
    return this.operationResponse(this.newOperation(project, scope, 'compute.instanceGroupManagers.resize', key));
  }

  /** Resize-down victims (see the header): not RUNNING first, then an older template, then arbitrary. */
  private resizeVictims(members: Stored[], igm: Json, count: number): Stored[] {
    if (count <= 0) return [];
    const rank = (s: Stored) =>
      s.resource.status !== 'RUNNING' ? 0 : s.resource.instanceTemplate !== igm.instanceTemplate ? 1 : 2;
    const shuffled = members.map((m) => ({ m, r: this.random() })).sort((a, b) => rank(a.m) - rank(b.m) || a.r - b.r);
    return shuffled.slice(0, count).map((x) => x.m);
  }

  /** The members a body's `instances` (URLs) name; 400 for one that is not a member (unless skipped on validation errors). */
  private named(key: string, igm: Json, body: Json): Stored[] {
    const members = this.members(key);
    const found: Stored[] = [];
    for (const url of (body.instances as string[] | undefined) ?? []) {
      const instanceKey = url.slice(url.indexOf('projects/'));
      const member = members.find((m) => m.key === instanceKey);
      if (member) found.push(member);
      else if (body.skipInstancesOnValidationError !== true)
        throw new HttpError(400, `Instance '${url}' is not a member of '${igm.name}'`, 'invalid');
    }
    return found;
  }

  private deleteInstances(project: string, scope: string, key: string, body: Json): FakeResponse {
    const igm = this.mustGet(key).resource;
    const doomed = this.named(key, igm, body);
    const op = this.newOperation(project, scope, 'compute.instanceGroupManagers.deleteInstances', key);
    for (const member of doomed) this.resources.delete(member.key);
    // "reduces the targetSize of the managed instance group by the number of instances that you delete"
    igm.targetSize = Math.max(0, Number(igm.targetSize) - doomed.length);
    return this.operationResponse(op);
  }

  private createInstances(project: string, scope: string, key: string, body: Json): FakeResponse {
    const igm = this.mustGet(key).resource;
    const wanted = ((body.instances as Json[] | undefined) ?? []).map((i) => String(i.name ?? ''));
    for (const name of wanted) {
      if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name))
        throw new HttpError(400, `Invalid value for field 'resource.instances[].name': '${name}'.`, 'invalid');
      if (this.resources.has(`projects/${project}/${scope}/instances/${name}`))
        throw new HttpError(
          409,
          `The resource 'projects/${project}/${scope}/instances/${name}' already exists`,
          'alreadyExists',
        );
    }
    const op = this.newOperation(project, scope, 'compute.instanceGroupManagers.createInstances', key);
    for (const name of wanted) this.addInstance(project, scope, igm, { name });
    igm.targetSize = Number(igm.targetSize) + wanted.length;
    return this.operationResponse(op);
  }

  private abandonInstances(project: string, scope: string, key: string, body: Json): FakeResponse {
    const igm = this.mustGet(key).resource;
    const leaving = this.named(key, igm, body);
    const op = this.newOperation(project, scope, 'compute.instanceGroupManagers.abandonInstances', key);
    for (const member of leaving) delete member.resource.createdBy;
    igm.targetSize = Math.max(0, Number(igm.targetSize) - leaving.length);
    return this.operationResponse(op);
  }

  private setInstanceTemplate(project: string, scope: string, key: string, body: Json): FakeResponse {
    const stored = this.mustGet(key);
    const template = String(body.instanceTemplate ?? '');
    const refs = this.references({ template });
    if (refs.size !== 1)
      throw new HttpError(400, `Invalid value for field 'resource.instanceTemplate': '${template}'.`, 'invalid');
    stored.resource.instanceTemplate = template;
    stored.refs = new Set([...[...stored.refs].filter((r) => !r.includes('/instanceTemplates/')), ...refs]);
    return this.operationResponse(
      this.newOperation(project, scope, 'compute.instanceGroupManagers.setInstanceTemplate', key),
    );
  }

  private setMetadata(project: string, scope: string, key: string, body: Json): FakeResponse {
    const instance = this.mustGet(key).resource;
    const current = (instance.metadata ?? {}) as Json;
    const fingerprint = String(current.fingerprint ?? 'initial');
    if (body.fingerprint !== fingerprint) {
      throw new HttpError(412, `Supplied fingerprint does not match current metadata fingerprint.`, 'conditionNotMet');
    }
    instance.metadata = {
      items: body.items ?? [],
      fingerprint: randomBytes(6).toString('base64'),
      kind: 'compute#metadata',
    };
    return this.operationResponse(this.newOperation(project, scope, 'setMetadata', key));
  }

  /**
   * GCP recreates a managed instance (autohealing, a failed host): same name, a new VM from the template. What the
   * group's stateful policy preserves (disks by device name, internal IPs by interface) carries over; the rest is new.
   */
  recreateInstance(instanceName: string): void {
    const member = [...this.resources.values()].find(
      (s) => s.collection === 'instances' && s.resource.name === instanceName,
    );
    if (!member) throw new Error(`no instance ${instanceName}`);
    const igm = [...this.resources.values()].find(
      (s) => s.collection === 'instanceGroupManagers' && s.resource.selfLink === member.resource.createdBy,
    );
    if (!igm) throw new Error(`${instanceName} is not a managed instance`);
    const preservedState = ((igm.resource.statefulPolicy as Json | undefined)?.preservedState ?? {}) as {
      disks?: Json;
      internalIPs?: Json;
    };
    const old = member.resource as {
      networkInterfaces: { name: string; networkIP: string }[];
      disks: { deviceName: string; source: string }[];
    };
    const disks = Object.fromEntries(
      old.disks.filter((d) => preservedState.disks?.[d.deviceName]).map((d) => [d.deviceName, d.source]),
    );
    const nic = old.networkInterfaces.find((n) => preservedState.internalIPs?.[n.name]);
    this.resources.delete(member.key);
    const [, project, scope] = /^projects\/([^/]+)\/(zones\/[^/]+)\//.exec(member.key)!;
    this.addInstance(project!, scope!, igm.resource, { name: instanceName, networkIP: nic?.networkIP, disks });
  }

  /** Where a TCP connection from the internet to ip:port ends up (see the module header); a string says why nowhere. */
  connect(ip: string, port: number): Delivery | string {
    const rule = this.list('forwardingRules').find((r) => {
      const address = this.byUrl(String(r.IPAddress ?? ''))?.resource;
      const [from, to = from] = String(r.portRange ?? '')
        .split('-')
        .map(Number);
      return address?.address === ip && port >= from! && port <= to!;
    });
    if (!rule) return `no forwarding rule for ${ip}:${port}`;
    if (rule.target) {
      const proxy = this.byUrl(String(rule.target))?.resource;
      if (!proxy) return `forwarding rule ${String(rule.name)}: its target does not exist`;
      const backend = this.byUrl(String(proxy.service ?? ''))?.resource;
      if (!backend) return `target proxy ${String(proxy.name)}: its backend service does not exist`;
      const portName = String(backend.portName ?? 'http');
      for (const b of (backend.backends as Json[] | undefined) ?? []) {
        const group = this.byUrl(String(b.group))?.resource;
        const named = ((group?.namedPorts as { name: string; port: number }[] | undefined) ?? []).find(
          (n) => n.name === portName,
        );
        const instance = group && this.groupInstances(String(group.selfLink))[0];
        if (!named || !instance) continue;
        const ip = (instance.networkInterfaces as { networkIP: string }[])[0]!.networkIP;
        if (!this.firewallAllows(instance, FRONT_END_IP, named.port))
          return `no firewall rule lets ${FRONT_END_IP} reach ${String(instance.name)}:${named.port}`;
        return {
          instance: String(instance.name),
          destinationIp: ip,
          destinationPort: named.port,
          sourceIp: FRONT_END_IP,
          accepted: true,
        };
      }
      return `backend service ${String(backend.name)}: no instance group with named port "${portName}" has an instance`;
    }
    const backend = this.byUrl(String(rule.backendService ?? ''))?.resource;
    const instance = ((backend?.backends as Json[] | undefined) ?? [])
      .flatMap((b) => this.groupInstances(String(this.byUrl(String(b.group))?.resource.selfLink)))
      .at(0);
    if (!instance) return `forwarding rule ${String(rule.name)}: no backend instance`;
    const own = (instance.networkInterfaces as { networkIP: string }[]).map((n) => n.networkIP);
    // Passthrough: the packet keeps the load balancer's address as its destination.
    return {
      instance: String(instance.name),
      destinationIp: ip,
      destinationPort: port,
      sourceIp: '198.51.100.1',
      accepted: own.includes(ip),
    };
  }

  private byUrl(url: string): Stored | undefined {
    return this.resources.get(url.slice(url.indexOf('projects/')));
  }

  private groupInstances(groupSelfLink: string): Json[] {
    const igmLink = groupSelfLink.replace('/instanceGroups/', '/instanceGroupManagers/');
    return this.list('instances').filter((i) => i.createdBy === igmLink && i.status === 'RUNNING');
  }

  private firewallAllows(instance: Json, sourceIp: string, port: number): boolean {
    const tags = (instance.tags as { items?: string[] } | undefined)?.items ?? [];
    const inRange = (cidr: string) => {
      const [base, bits] = cidr.split('/');
      const n = (a: string) => a.split('.').reduce((x, o) => x * 256 + Number(o), 0);
      const mask = Number(bits) === 0 ? 0 : 2 ** 32 - 2 ** (32 - Number(bits));
      return (n(sourceIp) & mask) >>> 0 === (n(base!) & mask) >>> 0;
    };
    return this.list('firewalls').some(
      (f) =>
        (f.direction ?? 'INGRESS') === 'INGRESS' &&
        ((f.sourceRanges as string[] | undefined) ?? []).some(inRange) &&
        (!(f.targetTags as string[] | undefined)?.length || (f.targetTags as string[]).some((t) => tags.includes(t))) &&
        ((f.allowed as { IPProtocol: string; ports?: string[] }[] | undefined) ?? []).some(
          (a) =>
            (a.IPProtocol === 'tcp' || a.IPProtocol === 'all') &&
            (!a.ports ||
              a.ports.some((p) => {
                const [from, to = from] = p.split('-').map(Number);
                return port >= from! && port <= to!;
              })),
        ),
    );
  }

  private listManaged(key: string): FakeResponse {
    this.mustGet(key);
    this.served(this.members(key).map((m) => m.resource));
    return json({
      managedInstances: this.members(key).map((m) => ({
        instance: m.resource.selfLink,
        id: m.resource.id,
        instanceStatus: m.resource.status,
        currentAction: m.resource.status === 'RUNNING' ? 'NONE' : 'CREATING',
        instanceTemplate: m.resource.instanceTemplate,
      })),
    });
  }
}

/** The filters the provider sends: `labels.KEY = "VALUE"` (others match everything). */
function matchesFilter(resource: Json, filter: string | null): boolean {
  const m = filter ? /^labels\.([\w-]+)\s*=\s*"?([^"]*)"?$/.exec(filter.trim()) : null;
  if (!m) return true;
  return (resource.labels as Record<string, string> | undefined)?.[m[1]!] === m[2];
}
