/**
 * The fake Compute Engine API (REST, /compute/v1): keeps resources per project and scope, checks references
 * (an insert naming a missing resource gets 404, deleting a resource another one uses gets 400
 * resourceInUseByAnotherResource, a duplicate name 409 alreadyExists), and emulates zone/region/global
 * operations that finish after a fixed time, including `wait`. A managed instance group makes its instance
 * group and instances from its template (labels, metadata, disks, confidential settings carried over), and
 * resizes, deletes and recreates them. Operation faults make an accepted insert finish with an error (quota).
 */
import { randomBytes } from 'node:crypto';
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
]);

const REF_PATTERN = /projects\/[^/]+\/(?:global|regions\/[^/]+|zones\/[^/]+)\/([A-Za-z]+)\/[^/?]+$/;

export class FakeCompute {
  readonly resources = new Map<string, Stored>();
  private readonly operations = new Map<string, FakeOperation>();
  private readonly operationFaults: OperationFault[] = [];
  private readonly shielded = new Map<string, ShieldedIdentity>();
  private counter = 0;
  private nextIp = 10;

  constructor(
    private readonly baseUrl: () => string,
    private readonly operationMs: () => number,
    private readonly waitTimeoutMs: number,
  ) {}

  reset(): void {
    this.resources.clear();
    this.operations.clear();
    this.operationFaults.length = 0;
    this.shielded.clear();
  }

  failOperation(fault: OperationFault): void {
    this.operationFaults.push({ times: 1, ...fault });
  }

  setShieldedIdentity(instanceName: string, identity: ShieldedIdentity): void {
    this.shielded.set(instanceName, identity);
  }

  /** Resources of a collection (all when omitted), as GCP would return them. */
  list(collection?: string): Json[] {
    return [...this.resources.values()].filter((s) => !collection || s.collection === collection).map((s) => s.resource);
  }

  async handle(req: FakeRequest): Promise<FakeResponse | undefined> {
    const m = /^\/compute\/v1\/projects\/([^/]+)\/(.*)$/.exec(req.path);
    if (!m) return undefined;
    const project = m[1]!;
    const rest = m[2]!.split('/');
    if (rest[0] === 'aggregated' && rest[1] === 'instances' && req.method === 'GET') return this.aggregatedInstances(project, req);

    // Scope: global | regions/R | zones/Z
    const scope = rest[0] === 'global' ? 'global' : `${rest[0]}/${rest[1]}`;
    const tail = rest.slice(scope === 'global' ? 1 : 2);
    const [collection, name, verb] = tail;
    if (collection === 'operations' && name) return this.operation(project, scope, name, verb === 'wait');
    if (!collection || !COLLECTIONS.has(collection)) throw new HttpError(404, `Unknown collection ${collection}`, 'notFound');
    const key = `projects/${project}/${scope}/${collection}/${name ?? ''}`;

    if (!name) {
      if (req.method === 'GET') return json({ kind: `compute#${collection}List`, items: this.filtered(project, scope, collection, req.query.get('filter')) });
      if (req.method === 'POST') return this.insert(req, project, scope, collection, req.body as Json);
    } else if (!verb) {
      if (req.method === 'GET') return json(this.mustGet(key).resource);
      if (req.method === 'DELETE') return this.delete(project, scope, key);
    } else if (collection === 'instanceGroupManagers' && req.method === 'POST') {
      if (verb === 'resize') return this.resize(project, scope, key, Number(req.query.get('size')));
      if (verb === 'deleteInstances') return this.deleteInstances(project, scope, key, req.body as Json);
      if (verb === 'listManagedInstances') return this.listManaged(key);
    } else if (collection === 'instances' && verb === 'getShieldedInstanceIdentity' && req.method === 'GET') {
      this.mustGet(key);
      const identity = this.shielded.get(name) ?? {};
      return json({ kind: 'compute#shieldedInstanceIdentity', signingKey: identity, encryptionKey: identity });
    }
    throw new HttpError(404, `No route for ${req.method} ${req.path}`, 'notFound');
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
    return [...this.resources.values()].filter((s) => s.key.startsWith(prefix) && matchesFilter(s.resource, filter)).map((s) => s.resource);
  }

  private aggregatedInstances(project: string, req: FakeRequest): FakeResponse {
    const items: Record<string, { instances: Json[] }> = {};
    for (const s of this.resources.values()) {
      const m = /^projects\/([^/]+)\/zones\/([^/]+)\/instances\//.exec(s.key);
      if (!m || m[1] !== project || !matchesFilter(s.resource, req.query.get('filter'))) continue;
      (items[`zones/${m[2]}`] ??= { instances: [] }).instances.push(s.resource);
    }
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

  private newOperation(project: string, scope: string, type: string, targetKey: string, fault?: OperationFault): FakeOperation {
    const name = `operation-${Date.now()}-${++this.counter}`;
    const scopeUrl = scope === 'global' ? {} : scope.startsWith('zones/') ? { zone: this.url(`projects/${project}/${scope}`) } : { region: this.url(`projects/${project}/${scope}`) };
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
    if (!op) throw new HttpError(404, `The resource 'projects/${project}/${scope}/operations/${name}' was not found`, 'notFound');
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
    if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) throw new HttpError(400, `Invalid value for field 'resource.name': '${name}'.`, 'invalid');
    const key = `projects/${project}/${scope}/${collection}/${name}`;
    if (this.resources.has(key)) throw new HttpError(409, `The resource '${key}' already exists`, 'alreadyExists');
    const refs = this.references(body);
    const fault = this.operationFaults.find((f) => (f.times ?? 1) > 0 && f.match.test(`${req.method} ${req.path}`));
    if (fault) fault.times = (fault.times ?? 1) - 1;
    const op = this.newOperation(project, scope, 'insert', key, fault);
    if (fault) return this.operationResponse(op);

    const resource: Json = {
      ...structuredClone(body),
      id: String(BigInt(Date.now()) * 1000n + BigInt(++this.counter)),
      creationTimestamp: new Date().toISOString(),
      selfLink: this.url(key),
    };
    if (collection === 'addresses') Object.assign(resource, { address: `203.0.113.${++this.nextIp % 250}`, status: 'RESERVED' });
    this.resources.set(key, { key, collection, resource, refs });
    if (collection === 'instanceGroupManagers') this.createGroup(project, scope, key, resource);
    return this.operationResponse(op);
  }

  private createGroup(project: string, scope: string, key: string, igm: Json): void {
    const groupKey = key.replace('/instanceGroupManagers/', '/instanceGroups/');
    this.resources.set(groupKey, { key: groupKey, collection: 'instanceGroups', resource: { kind: 'compute#instanceGroup', name: igm.name, selfLink: this.url(groupKey) }, refs: new Set() });
    igm.instanceGroup = this.url(groupKey);
    for (let i = 0; i < Number(igm.targetSize ?? 0); i++) this.addInstance(project, scope, igm);
  }

  private members(igmKey: string): Stored[] {
    const igm = this.resources.get(igmKey);
    return [...this.resources.values()].filter((s) => s.collection === 'instances' && s.resource.createdBy === igm?.resource.selfLink);
  }

  private addInstance(project: string, scope: string, igm: Json): void {
    const templateKey = String(igm.instanceTemplate).slice(String(igm.instanceTemplate).indexOf('projects/'));
    const props = (this.resources.get(templateKey)?.resource.properties ?? {}) as Json;
    const name = `${igm.baseInstanceName}-${randomBytes(2).toString('hex')}`;
    const key = `projects/${project}/${scope}/instances/${name}`;
    const nics = (props.networkInterfaces as Json[] | undefined) ?? [{}];
    const instance: Json = {
      kind: 'compute#instance',
      id: String(BigInt(Date.now()) * 1000n + BigInt(++this.counter)),
      name,
      zone: this.url(`projects/${project}/${scope}`),
      machineType: this.url(`projects/${project}/${scope}/machineTypes/${props.machineType}`),
      status: 'RUNNING',
      labels: props.labels ?? {},
      metadata: props.metadata ?? {},
      tags: props.tags ?? {},
      disks: ((props.disks as Json[] | undefined) ?? []).map((d, i) => ({ deviceName: d.deviceName, boot: d.boot, index: i, diskSizeGb: (d.initializeParams as Json | undefined)?.diskSizeGb })),
      confidentialInstanceConfig: props.confidentialInstanceConfig,
      shieldedInstanceConfig: props.shieldedInstanceConfig,
      scheduling: props.scheduling,
      networkInterfaces: nics.map((nic) => ({ ...nic, networkIP: `192.168.178.${++this.nextIp % 250}`, name: 'nic0' })),
      createdBy: igm.selfLink,
      selfLink: this.url(key),
    };
    this.resources.set(key, { key, collection: 'instances', resource: instance, refs: new Set() });
  }

  private delete(project: string, scope: string, key: string): FakeResponse {
    const stored = this.mustGet(key);
    const dependents = (k: string) => [...this.resources.values()].filter((s) => s.refs.has(k));
    const blocking = [...dependents(key), ...(stored.collection === 'instanceGroupManagers' ? dependents(key.replace('/instanceGroupManagers/', '/instanceGroups/')) : [])];
    if (blocking.length > 0) {
      throw new HttpError(400, `The resource '${key}' is already being used by '${blocking[0]!.key}'`, 'resourceInUseByAnotherResource');
    }
    if (stored.collection === 'instanceGroupManagers') {
      for (const member of this.members(key)) this.resources.delete(member.key);
      this.resources.delete(key.replace('/instanceGroupManagers/', '/instanceGroups/'));
    }
    this.resources.delete(key);
    return this.operationResponse(this.newOperation(project, scope, 'delete', key));
  }

  private resize(project: string, scope: string, key: string, size: number): FakeResponse {
    const igm = this.mustGet(key).resource;
    if (!Number.isInteger(size) || size < 0) throw new HttpError(400, `Invalid value for field 'size': '${size}'.`, 'invalid');
    const members = this.members(key);
    for (const extra of members.slice(size)) this.resources.delete(extra.key);
    for (let i = members.length; i < size; i++) this.addInstance(project, scope, igm);
    igm.targetSize = size;
    return this.operationResponse(this.newOperation(project, scope, 'compute.instanceGroupManagers.resize', key));
  }

  private deleteInstances(project: string, scope: string, key: string, body: Json): FakeResponse {
    const igm = this.mustGet(key).resource;
    const op = this.newOperation(project, scope, 'compute.instanceGroupManagers.deleteInstances', key);
    for (const url of (body.instances as string[] | undefined) ?? []) {
      const instanceKey = url.slice(url.indexOf('projects/'));
      if (!this.members(key).some((m) => m.key === instanceKey)) throw new HttpError(400, `Instance '${url}' is not a member of '${igm.name}'`, 'invalid');
      this.resources.delete(instanceKey);
    }
    // The group keeps its target size: it makes replacements when the operation is done.
    op.onDone = () => {
      for (let i = this.members(key).length; i < Number(igm.targetSize); i++) this.addInstance(project, scope, igm);
    };
    return this.operationResponse(op);
  }

  private listManaged(key: string): FakeResponse {
    this.mustGet(key);
    return json({ managedInstances: this.members(key).map((m) => ({ instance: m.resource.selfLink, id: m.resource.id, instanceStatus: m.resource.status, currentAction: 'NONE' })) });
  }
}

/** The filters the provider sends: `labels.KEY = "VALUE"` (others match everything). */
function matchesFilter(resource: Json, filter: string | null): boolean {
  const m = filter ? /^labels\.([\w-]+)\s*=\s*"?([^"]*)"?$/.exec(filter.trim()) : null;
  if (!m) return true;
  return (resource.labels as Record<string, string> | undefined)?.[m[1]!] === m[2];
}
