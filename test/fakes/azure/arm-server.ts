/**
 * A fake Azure Resource Manager for tests and benchmarks: an HTTPS server on 127.0.0.1 (with its own test CA)
 * that the unmodified Azure SDKs talk to. It keeps resources in memory by ARM id and speaks the wire formats
 * the SDKs expect:
 *   - PUT/PATCH/DELETE of network and compute resources are long-running: 201/200/202 with an
 *     Azure-AsyncOperation header whose status goes InProgress -> Succeeded (or Failed) after `lroDurationMs`;
 *     resource group deletion uses a Location header (202 while running, 200 when done);
 *   - resource groups (PUT, HEAD), identities and role assignments answer synchronously;
 *   - scale sets get VMs (and synthesized NICs with private IPs) matching sku.capacity;
 *   - references between network resources are checked like Azure does: a PUT referring to a resource that does
 *     not exist (or is not provisioned yet) fails, and deleting a resource that another one uses fails, so a
 *     wrong creation or deletion order shows up in tests;
 *   - resource providers: a subscription may not be registered for a namespace (unregister()); a PUT of a resource
 *     in it then fails with 409 MissingSubscriptionRegistration, as on a fresh subscription, until a POST
 *     .../providers/{namespace}/register has been made and `registrationMs` have passed (GET .../providers/{ns}
 *     answers registrationState NotRegistered, Registering, Registered);
 *   - faults can be injected per request (throttling 429/503 with Retry-After, quota and conflict errors,
 *     failed operations), and every request is logged for assertions.
 * Latency: `latencyMs` before every response and `lroDurationMs` per long-running operation (for the benchmark).
 *
 * Scale-set VMs as Azure provisions them:
 *   - a new VM stays Creating until its guest reports Ready to the wire server (168.63.129.16: GET
 *     /machine/?comp=goalstate, then POST /machine/?comp=health with State Ready); a scale set whose model leaves
 *     provisionVMAgent on waits for the Azure guest agent's provisioning, which the node image does not run, so its VMs
 *     end Failed with OSProvisioningTimedOut (https://learn.microsoft.com/azure/virtual-machines/linux/no-agent,
 *     https://learn.microsoft.com/troubleshoot/azure/virtual-machines/linux/linux-vm-provisioning-timeout). A scale
 *     set's create/update operation finishes only when its VMs did. `vmReady: 'at-boot'` plays a guest that
 *     reports Ready `vmBootMs` after it was made (provider tests); 'wire-server' waits for the report on
 *     `wireServerUrl` + /node/{computerName} (cloud in a box: the node program reports);
 *   - a lower capacity deletes VMs by the scale-in policy (https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-scale-in-policy):
 *     Default (one zone) the highest instance id, or OldestVM / NewestVM when the model's scaleInPolicy says so;
 *     deleting one VM lowers the capacity by one;
 *   - a VM's own networkProfileConfiguration (PUT of the VM) overrides the model's: a VM whose IP configuration
 *     names no backend pool is not in the load balancer (backendPoolMembers).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { InjectedErrors } from '../injected.js';
import { makeTestTls } from './test-ca.js';

export const FAKE_TOKEN = 'fake-arm-token';
export const FAKE_TENANT = '72f988bf-0000-0000-0000-000000000001';

export interface LoggedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  body: unknown;
}

export interface Fault {
  method?: string;
  /** Matched against the request path (a substring, case-insensitive, or a RegExp). */
  path: string | RegExp;
  /** HTTP status to answer with; omitted with asyncError (the request is accepted, its operation fails). */
  status?: number;
  code?: string;
  message?: string;
  headers?: Record<string, string>;
  /** How many matching requests get the fault (default 1). */
  times?: number;
  /** The request is accepted but its long-running operation ends Failed with this error. */
  asyncError?: { code: string; message: string };
}

interface Stored {
  id: string;
  body: Record<string, unknown>;
}

interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

interface Operation {
  id: string;
  doneAt: number;
  finished: boolean;
  error?: { code: string; message: string };
  finish: () => void;
  /** After `finish`: still running, failed, or done (undefined), e.g. while a scale set's VMs provision. */
  waitFor?: () => 'running' | { code: string; message: string } | undefined;
}

export interface FakeArmOptions {
  latencyMs?: number;
  lroDurationMs?: number;
  /** First three octets of scale-set VMs' private and of public IPs (cloud in a box: loopback addresses). */
  privateIpBase?: string;
  publicIpBase?: string;
  /** When a new VM's guest reports Ready (see the header). Default 'at-boot'. */
  vmReady?: 'at-boot' | 'wire-server';
  vmBootMs?: number;
  /** How long Azure waits for a VM's provisioning before OSProvisioningTimedOut (Azure: 20 minutes). */
  provisioningTimeoutMs?: number;
}

const SYNC_TYPES = ['microsoft.managedidentity/', 'microsoft.authorization/'];

function segmentsOf(path: string): string[] {
  return path.split('/').filter(Boolean);
}

function key(path: string): string {
  return path.replace(/\/+$/, '').toLowerCase();
}

/** The ARM type of a resource path: "Microsoft.Network/loadBalancers" (children: ".../virtualMachines"). */
function typeOf(path: string): string {
  const segs = segmentsOf(path);
  const p = segs.findIndex((s) => s.toLowerCase() === 'providers');
  if (p < 0) return segs.length === 4 ? 'Microsoft.Resources/resourceGroups' : 'unknown';
  const rest = segs.slice(p + 2);
  return [segs[p + 1], ...rest.filter((_, i) => i % 2 === 0)].join('/');
}

/** A path names a collection when it ends in a type segment rather than a name. */
function isCollection(path: string): boolean {
  const segs = segmentsOf(path);
  const p = segs.findIndex((s) => s.toLowerCase() === 'providers');
  if (p < 0) return segs.length % 2 === 1;
  return (segs.length - p - 2) % 2 === 1;
}

/** The top-level resource (…/providers/{ns}/{type}/{name}) of any id, e.g. the vnet of a subnet id. */
function topLevelOf(id: string): string {
  const segs = segmentsOf(id);
  const p = segs.findIndex((s) => s.toLowerCase() === 'providers');
  return p < 0 ? id : '/' + segs.slice(0, p + 4).join('/');
}

/** Every "id" that refers to another Azure resource in a request body. */
function referencedIds(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) referencedIds(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'id' && typeof v === 'string' && v.startsWith('/subscriptions/')) out.push(v);
      else referencedIds(v, out);
    }
  }
  return out;
}

function deepMerge(target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const result = { ...target };
  for (const [k, v] of Object.entries(patch)) {
    const current = result[k];
    result[k] =
      v &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      current &&
      typeof current === 'object' &&
      !Array.isArray(current) &&
      k !== 'tags'
        ? deepMerge(current as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return result;
}

export class FakeArm {
  readonly requests: LoggedRequest[] = [];
  /** Resources by lowercased id. */
  readonly resources = new Map<string, Stored>();
  readonly faults: Fault[] = [];
  /**
   * What the fake answered on purpose, per kind: injected faults ("429 TooManyRequests"), and "Creating until Ready"
   * for each poll of a scale set operation still running because a VM of the set is Creating (see the header).
   */
  readonly injected = new InjectedErrors();
  /** Called for every request before it is answered (tests use it to interrupt a run at a chosen point). */
  onRequest?: (request: LoggedRequest) => void;
  latencyMs: number;
  lroDurationMs: number;

  private readonly operations = new Map<string, Operation>();
  /** Namespaces (lowercase) the subscription is not registered for, and when a requested registration completes. */
  private readonly unregisteredNamespaces = new Map<string, { registeredAt?: number }>();
  registrationMs = 5;
  private nextIp = 4;
  private nextPublicIp = 10;
  private readonly nextInstance = new Map<string, number>();
  private server!: https.Server;
  url!: string;
  caPem!: string;

  private readonly privateIpBase: string;
  private readonly publicIpBase: string;

  /** The wire server (plain HTTP): per VM under /node/{computerName}/machine/. */
  wireServerUrl = '';
  private wireServer?: http.Server;
  vmReady: 'at-boot' | 'wire-server';
  vmBootMs: number;
  provisioningTimeoutMs: number;
  /** Provisioning of VMs that are Creating: when made, and whether their guest reported Ready. */
  private readonly provisioning = new Map<string, { createdAt: number; reported: boolean }>();

  private constructor(options: FakeArmOptions) {
    this.vmReady = options.vmReady ?? 'at-boot';
    this.vmBootMs = options.vmBootMs ?? 0;
    this.provisioningTimeoutMs = options.provisioningTimeoutMs ?? 300;
    this.privateIpBase = options.privateIpBase ?? '10.0.0';
    this.publicIpBase = options.publicIpBase ?? '20.1.0';
    this.latencyMs = options.latencyMs ?? 0;
    this.lroDurationMs = options.lroDurationMs ?? 5;
  }

  static async start(options: FakeArmOptions = {}): Promise<FakeArm> {
    const fake = new FakeArm(options);
    const tls = makeTestTls();
    fake.caPem = tls.caPem;
    fake.server = https.createServer({ key: tls.keyPem, cert: tls.certPem }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        fake.handle(req.method ?? 'GET', req.url ?? '/', req.headers, Buffer.concat(chunks).toString('utf8')).then(
          ({ status, body, headers }) => {
            res.writeHead(status, {
              'content-type': 'application/json; charset=utf-8',
              'x-ms-request-id': randomUUID(),
              ...headers,
            });
            res.end(body === undefined ? undefined : JSON.stringify(body));
          },
          (err: unknown) => {
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ error: { code: 'FakeBug', message: String(err) } }));
          },
        );
      });
    });
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `https://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    fake.wireServer = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const reply = fake.wire(
          req.method ?? 'GET',
          req.url ?? '/',
          req.headers,
          Buffer.concat(chunks).toString('utf8'),
        );
        res.writeHead(reply.status, { 'content-type': 'text/xml; charset=utf-8' });
        res.end(reply.body);
      });
    });
    await new Promise<void>((resolve) => fake.wireServer!.listen(0, '127.0.0.1', resolve));
    fake.wireServerUrl = `http://127.0.0.1:${(fake.wireServer.address() as AddressInfo).port}`;
    return fake;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.wireServer) {
      this.wireServer.closeAllConnections();
      await new Promise<void>((resolve) => this.wireServer!.close(() => resolve()));
    }
  }

  /** The VM whose computer name is `computerName`. */
  private vmByComputerName(computerName: string): Stored | undefined {
    return [...this.resources.values()].find(
      (r) =>
        /\/virtualMachines\/[^/]+$/i.test(r.id) &&
        (r.body.properties as { osProfile?: { computerName?: string } }).osProfile?.computerName === computerName,
    );
  }

  /** The wire server's goal state and health report (see the header), for the VM named in the path. */
  private wire(
    method: string,
    rawUrl: string,
    headers: http.IncomingHttpHeaders,
    body: string,
  ): { status: number; body: string } {
    const m = /^\/node\/([^/]+)\/machine\/?\?comp=(goalstate|health)$/.exec(rawUrl);
    if (!m) return { status: 404, body: '<Error><Message>not found</Message></Error>' };
    if (!headers['x-ms-version'])
      return { status: 400, body: '<Error><Message>x-ms-version header required</Message></Error>' };
    const vm = this.vmByComputerName(m[1]!);
    if (!vm) return { status: 404, body: '<Error><Message>unknown VM</Message></Error>' };
    const instanceId = String(vm.body.name);
    if (m[2] === 'goalstate' && method === 'GET') {
      return {
        status: 200,
        body: `<?xml version="1.0" encoding="utf-8"?><GoalState><Version>2012-11-30</Version><Incarnation>1</Incarnation><Machine><ExpectedState>Started</ExpectedState></Machine><Container><ContainerId>${containerIdOf(vm.id)}</ContainerId><RoleInstanceList><RoleInstance><InstanceId>${instanceId}</InstanceId></RoleInstance></RoleInstanceList></Container></GoalState>`,
      };
    }
    if (m[2] === 'health' && method === 'POST') {
      const ready =
        new RegExp(`<InstanceId>${instanceId}</InstanceId>\\s*<Health>\\s*<State>Ready</State>`).test(body) &&
        body.includes(`<ContainerId>${containerIdOf(vm.id)}</ContainerId>`);
      if (!ready)
        return {
          status: 400,
          body: '<Error><Message>health report names another container or instance, or no Ready state</Message></Error>',
        };
      const state = this.provisioning.get(key(vm.id));
      if (state) state.reported = true;
      this.tick();
      return { status: 200, body: '' };
    }
    return { status: 405, body: '' };
  }

  /** Provisioning VMs move on (see the header): Succeeded once Ready was reported (agent off), Failed at the timeout. */
  private tick(): void {
    const now = Date.now();
    for (const [vmKey, state] of this.provisioning) {
      const vm = this.resources.get(vmKey);
      if (!vm) {
        this.provisioning.delete(vmKey);
        continue;
      }
      const set = this.resources.get(vmKey.replace(/\/virtualmachines\/[^/]+$/, ''));
      const profile = (
        set?.body.properties as
          | { virtualMachineProfile?: { osProfile?: { linuxConfiguration?: { provisionVMAgent?: boolean } } } }
          | undefined
      )?.virtualMachineProfile;
      const agentOff = profile?.osProfile?.linuxConfiguration?.provisionVMAgent === false;
      const reported = state.reported || (this.vmReady === 'at-boot' && now >= state.createdAt + this.vmBootMs);
      const props = vm.body.properties as Record<string, unknown>;
      if (agentOff && reported) {
        props.provisioningState = 'Succeeded';
        this.provisioning.delete(vmKey);
      } else if (now >= state.createdAt + this.provisioningTimeoutMs) {
        props.provisioningState = 'Failed';
        props.instanceView = {
          statuses: [
            {
              code: 'ProvisioningState/failed/OSProvisioningTimedOut',
              level: 'Error',
              message:
                'OS Provisioning for VM did not finish in the allotted time. The VM may still finish provisioning successfully.',
            },
          ],
        };
        this.provisioning.delete(vmKey);
      }
    }
  }

  /** A scale set's operation runs while any of its VMs provisions, and fails when one failed. */
  private scaleSetProgress(path: string): 'running' | { code: string; message: string } | undefined {
    this.tick();
    const vms = this.scaleSetVms(path);
    const failed = vms.find(
      (vm) => (vm.body.properties as { provisioningState?: string }).provisioningState === 'Failed',
    );
    if (failed)
      return {
        code: 'OSProvisioningTimedOut',
        message: `OS Provisioning for VM '${String(failed.body.name)}' did not finish in the allotted time.`,
      };
    return vms.some((vm) => (vm.body.properties as { provisioningState?: string }).provisioningState === 'Creating')
      ? 'running'
      : undefined;
  }

  /** The VMs of every scale set whose own or model NIC configuration puts them in the backend pool `poolId`. */
  backendPoolMembers(
    poolId: string,
  ): { id: string; computerName: string; privateIp: string; provisioningState: string }[] {
    const members = [];
    for (const vm of this.resources.values()) {
      const m = /^(.*\/virtualMachineScaleSets\/[^/]+)\/virtualMachines\/[^/]+$/i.exec(vm.id);
      if (!m) continue;
      const props = vm.body.properties as Record<string, unknown>;
      const set = this.resources.get(key(m[1]!))?.body.properties as
        { virtualMachineProfile?: { networkProfile?: unknown } } | undefined;
      const nics =
        (props.networkProfileConfiguration as { networkInterfaceConfigurations?: unknown } | undefined)
          ?.networkInterfaceConfigurations ??
        (set?.virtualMachineProfile?.networkProfile as { networkInterfaceConfigurations?: unknown } | undefined)
          ?.networkInterfaceConfigurations;
      if (referencedIds({ nics }).some((ref) => ref.toLowerCase() === poolId.toLowerCase())) {
        members.push({
          id: vm.id,
          computerName: String((props.osProfile as { computerName: string }).computerName),
          privateIp: String(props.privateIp),
          provisioningState: String(props.provisioningState),
        });
      }
    }
    return members;
  }

  /** Options that point the Azure provider at this fake. */
  providerOptions(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      endpoint: this.url,
      credential: { getToken: async () => ({ token: FAKE_TOKEN, expiresOnTimestamp: Date.now() + 3600_000 }) },
      tlsOptions: { ca: this.caPem },
      retryOptions: { maxRetries: 4, retryDelayInMs: 1, maxRetryDelayInMs: 5 },
      pollIntervalMs: 2,
      principalRetryDelayMs: 1,
      ...extra,
    };
  }

  /**
   * A gallery image definition as Azure serves it (community, shared or own gallery, by the image reference the
   * config names), with its SecurityType feature: confidential VMs boot only images marked for them.
   */
  seedGalleryImage(
    subscription: string,
    location: string,
    image: string,
    securityType = 'ConfidentialVMSupported',
  ): void {
    const community = /^\/CommunityGalleries\/([^/]+)\/Images\/([^/]+)/i.exec(image);
    const shared = /^\/SharedGalleries\/([^/]+)\/Images\/([^/]+)/i.exec(image);
    const own =
      /^(\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.Compute\/galleries\/[^/]+\/images\/[^/]+)/i.exec(
        image,
      );
    const path = community
      ? `/subscriptions/${subscription}/providers/Microsoft.Compute/locations/${location}/communityGalleries/${community[1]}/images/${community[2]}`
      : shared
        ? `/subscriptions/${subscription}/providers/Microsoft.Compute/locations/${location}/sharedGalleries/${shared[1]}/images/${shared[2]}`
        : own?.[1];
    if (!path) throw new Error(`not a gallery image: ${image}`);
    this.seed(path, {
      location,
      properties: {
        osType: 'Linux',
        osState: 'Generalized',
        hyperVGeneration: 'V2',
        features: [{ name: 'SecurityType', value: securityType }],
      },
    });
  }

  /** The subscription is not registered for these resource provider namespaces (as a fresh subscription). */
  unregister(...namespaces: string[]): void {
    for (const ns of namespaces) this.unregisteredNamespaces.set(ns.toLowerCase(), {});
  }

  private registrationState(namespace: string): 'NotRegistered' | 'Registering' | 'Registered' {
    const entry = this.unregisteredNamespaces.get(namespace.toLowerCase());
    if (!entry) return 'Registered';
    if (entry.registeredAt === undefined) return 'NotRegistered';
    return Date.now() >= entry.registeredAt ? 'Registered' : 'Registering';
  }

  private resourceProvider(method: string, subscription: string, namespace: string, register: boolean): Reply {
    if (register && method === 'POST') {
      const entry = this.unregisteredNamespaces.get(namespace.toLowerCase());
      if (entry && entry.registeredAt === undefined) entry.registeredAt = Date.now() + this.registrationMs;
    } else if (register || method !== 'GET') {
      return error(405, 'MethodNotAllowed', `${method} is not supported`);
    }
    return {
      status: 200,
      body: {
        id: `/subscriptions/${subscription}/providers/${namespace}`,
        namespace,
        registrationState: this.registrationState(namespace),
        resourceTypes: [],
      },
    };
  }

  inject(fault: Fault): void {
    this.faults.push({ times: 1, ...fault });
  }

  /** Ids of the resources that exist (top-level ones, without scale set VMs), sorted. */
  resourceIds(): string[] {
    // VMs belong to their scale set; gallery images are the image publisher's, not the subscription's.
    return [...this.resources.values()]
      .map((r) => r.id)
      .filter((id) => !/\/virtualMachines\/|\/(communityGalleries|sharedGalleries)\//i.test(id))
      .sort();
  }

  get(id: string): Record<string, unknown> | undefined {
    return this.resources.get(key(id))?.body;
  }

  /** Requests with the given method whose path contains the fragment (case-insensitive). */
  find(method: string, fragment: string): LoggedRequest[] {
    return this.requests.filter((r) => r.method === method && r.path.toLowerCase().includes(fragment.toLowerCase()));
  }

  /** Adds a resource directly (e.g. an existing resource group), already provisioned. */
  seed(id: string, body: Record<string, unknown>): void {
    this.resources.set(key(id), { id, body: { id, name: segmentsOf(id).at(-1), type: typeOf(id), ...body } });
  }

  private finishDueOperations(): void {
    const now = Date.now();
    for (const op of this.operations.values()) {
      if (!op.finished && op.doneAt <= now) {
        op.finished = true;
        op.finish();
      }
    }
  }

  private async handle(
    method: string,
    rawUrl: string,
    headers: NodeJS.Dict<string | string[]>,
    rawBody: string,
  ): Promise<Reply> {
    if (this.latencyMs > 0) await sleep(this.latencyMs);
    // ARM tolerates "//" (the SDKs send it for scope parameters, e.g. /{scope}/providers/...); so does the fake.
    const url = new URL(rawUrl.replace(/^\/+/, '/').replace(/\/{2,}/g, '/'), this.url);
    const path = decodeURIComponent(url.pathname).replace(/\/+$/, '');
    const body = rawBody ? (JSON.parse(rawBody) as Record<string, unknown>) : undefined;
    const logged: LoggedRequest = { method, path, query: url.searchParams, body };
    this.requests.push(logged);
    this.onRequest?.(logged);
    if (headers.authorization !== `Bearer ${FAKE_TOKEN}`) {
      return error(
        401,
        'AuthenticationFailed',
        'Authentication failed. The Authorization header is missing or invalid.',
      );
    }
    if (!url.searchParams.get('api-version'))
      return error(
        400,
        'MissingApiVersionParameter',
        'The api-version query parameter (?api-version=) is required for all requests.',
      );
    this.finishDueOperations();
    this.tick();

    const fault = this.faults.find(
      (f) =>
        (f.times ?? 1) > 0 &&
        (!f.method || f.method === method) &&
        (typeof f.path === 'string' ? path.toLowerCase().includes(f.path.toLowerCase()) : f.path.test(path)),
    );
    let asyncError: Fault['asyncError'];
    if (fault) {
      fault.times = (fault.times ?? 1) - 1;
      this.injected.hit(
        fault.asyncError
          ? `async ${fault.asyncError.code}`
          : `${fault.status ?? 500} ${fault.code ?? 'InternalServerError'}`,
      );
      if (fault.asyncError) asyncError = fault.asyncError;
      else
        return {
          ...error(fault.status ?? 500, fault.code ?? 'InternalServerError', fault.message ?? 'Injected fault.'),
          headers: fault.headers,
        };
    }

    const segs = segmentsOf(path);
    const opIndex = segs.findIndex((s) => s.toLowerCase() === 'operations' || s.toLowerCase() === 'operationresults');
    if (method === 'GET' && opIndex > 0 && segs[opIndex - 2]?.toLowerCase() === 'locations')
      return this.operationStatus(segs[opIndex], segs[opIndex + 1]);

    const provider = /^\/subscriptions\/([^/]+)\/providers\/([^/]+)(\/register)?$/i.exec(path);
    if (provider) return this.resourceProvider(method, provider[1]!, provider[2]!, Boolean(provider[3]));
    if (/\/virtualMachineScaleSets\/[^/]+\/networkInterfaces$/i.test(path) && method === 'GET')
      return this.listScaleSetNics(path);
    if (/^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/resources$/i.test(path) && method === 'GET')
      return this.listByTag(path, url.searchParams);

    if (method === 'PUT' && /\/virtualMachineScaleSets\/[^/]+\/virtualMachines\/[^/]+$/i.test(path))
      return this.putVm(path, body ?? {}, asyncError);

    switch (method) {
      case 'HEAD':
        return { status: this.resources.has(key(path)) ? 204 : 404 };
      case 'GET':
        return this.getOrList(path);
      case 'PUT':
        return this.put(path, body ?? {}, asyncError);
      case 'PATCH':
        return this.patch(path, body ?? {}, asyncError);
      case 'DELETE':
        return this.delete(path, asyncError);
      default:
        return error(405, 'MethodNotAllowed', `${method} is not supported`);
    }
  }

  private getOrList(path: string): Reply {
    const stored = this.resources.get(key(path));
    if (stored) return { status: 200, body: stored.body };
    if (isCollection(path)) {
      const prefix = key(path) + '/';
      const value = [...this.resources.entries()]
        .filter(([k]) => k.startsWith(prefix) && !k.slice(prefix.length).includes('/'))
        .map(([, r]) => r.body);
      return { status: 200, body: { value } };
    }
    return notFound(path);
  }

  private isLongRunning(path: string): boolean {
    const type = typeOf(path).toLowerCase();
    return !SYNC_TYPES.some((t) => type.startsWith(t)) && type !== 'microsoft.resources/resourcegroups';
  }

  /** Checks that every network resource the body refers to exists and is provisioned. */
  private checkReferences(path: string, body: Record<string, unknown>): Reply | undefined {
    for (const ref of referencedIds(body)) {
      if (!/\/providers\/Microsoft\.Network\//i.test(ref)) continue;
      const top = topLevelOf(ref);
      const selfRef = key(top) === key(path);
      const owner = selfRef
        ? { properties: (body.properties ?? {}) as Record<string, unknown> }
        : this.resources.get(key(top))?.body;
      if (!owner)
        return error(
          400,
          'InvalidResourceReference',
          `Resource ${ref} referenced by resource ${path} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.`,
        );
      const state = (owner.properties as Record<string, unknown> | undefined)?.provisioningState;
      if (!selfRef && state !== 'Succeeded')
        return error(
          400,
          'ReferencedResourceNotProvisioned',
          `Cannot proceed with operation because resource ${top} used by resource ${path} is not in Succeeded state. Resource is in ${String(state)} state.`,
        );
      const child = segmentsOf(ref.slice(top.length));
      if (child.length === 2) {
        const list = (owner.properties as Record<string, unknown>)[child[0]] as { name?: string }[] | undefined;
        if (!list?.some((c) => c.name?.toLowerCase() === child[1].toLowerCase())) {
          return error(
            400,
            'InvalidResourceReference',
            `Resource ${ref} referenced by resource ${path} was not found.`,
          );
        }
      }
    }
    return undefined;
  }

  private startOperation(
    path: string,
    finish: () => void,
    asyncError?: Fault['asyncError'],
    waitFor?: Operation['waitFor'],
  ): string {
    const id = randomUUID();
    const segs = segmentsOf(path);
    const p = segs.findIndex((s) => s.toLowerCase() === 'providers');
    const namespace = p >= 0 ? segs[p + 1] : 'Microsoft.Resources';
    this.operations.set(id, {
      id,
      doneAt: Date.now() + this.lroDurationMs,
      finished: false,
      error: asyncError,
      finish: asyncError ? () => undefined : finish,
      waitFor,
    });
    return `${this.url}/subscriptions/${segs[1]}/providers/${namespace}/locations/fakeregion/operations/${id}?api-version=2024-01-01`;
  }

  private operationStatus(kind: string, id: string): Reply {
    const op = this.operations.get(id);
    if (!op) return error(404, 'OperationNotFound', `Operation ${id} not found.`);
    let running = !op.finished;
    if (!running && op.waitFor && !op.error) {
      const progress = op.waitFor();
      if (progress === 'running') {
        running = true;
        this.injected.hit('Creating until Ready');
      } else if (progress) op.error = progress;
    }
    if (kind.toLowerCase() === 'operationresults')
      return { status: running ? 202 : 200, body: running ? undefined : {} };
    return {
      status: 200,
      body: {
        id,
        name: id,
        status: running ? 'InProgress' : op.error ? 'Failed' : 'Succeeded',
        ...(op.error && !running ? { error: op.error } : {}),
      },
    };
  }

  private withDefaults(path: string, body: Record<string, unknown>, state: string): Record<string, unknown> {
    const segs = segmentsOf(path);
    const type = typeOf(path);
    const properties: Record<string, unknown> = {
      ...((body.properties as Record<string, unknown>) ?? {}),
      provisioningState: state,
    };
    const lower = type.toLowerCase();
    if (lower === 'microsoft.network/publicipaddresses' && !properties.ipAddress)
      properties.ipAddress = `${this.publicIpBase}.${this.nextPublicIp++}`;
    if (lower === 'microsoft.managedidentity/userassignedidentities') {
      Object.assign(properties, {
        principalId: properties.principalId ?? randomUUID(),
        clientId: properties.clientId ?? randomUUID(),
        tenantId: FAKE_TENANT,
      });
    }
    if (lower === 'microsoft.authorization/roleassignments')
      properties.scope = topLevelOf(path).replace(/\/providers\/Microsoft\.Authorization.*$/i, '');
    // Sub-resources (subnets, pools, probes, ...) get their ids, as Azure returns them.
    for (const [k, v] of Object.entries(properties)) {
      if (Array.isArray(v) && v.every((x) => x && typeof x === 'object' && 'name' in x)) {
        properties[k] = v.map((x: Record<string, unknown>) => ({ ...x, id: `${path}/${k}/${String(x.name)}` }));
      }
    }
    return { ...body, id: path, name: segs.at(-1), type, properties };
  }

  private put(path: string, body: Record<string, unknown>, asyncError?: Fault['asyncError']): Reply {
    if (isCollection(path)) return error(405, 'MethodNotAllowed', 'PUT on a collection');
    const namespace = typeOf(path).split('/')[0]!;
    if (this.registrationState(namespace) !== 'Registered') {
      return error(
        409,
        'MissingSubscriptionRegistration',
        `The subscription is not registered to use namespace '${namespace}'. See https://aka.ms/rps-not-found for how to register subscriptions.`,
      );
    }
    const parentGroup = '/' + segmentsOf(path).slice(0, 4).join('/');
    if (segmentsOf(path).length > 4 && !this.resources.has(key(parentGroup))) {
      return error(404, 'ResourceGroupNotFound', `Resource group '${segmentsOf(path)[3]}' could not be found.`);
    }
    const invalid = this.checkReferences(path, body);
    if (invalid) return invalid;
    const existed = this.resources.has(key(path));
    if (!this.isLongRunning(path)) {
      const stored = this.withDefaults(path, body, 'Succeeded');
      const previous = this.resources.get(key(path))?.body.properties as Record<string, unknown> | undefined;
      if (previous?.principalId)
        Object.assign(stored.properties as object, { principalId: previous.principalId, clientId: previous.clientId });
      this.resources.set(key(path), { id: path, body: stored });
      return { status: existed ? 200 : 201, body: stored };
    }
    const stored = this.withDefaults(path, body, existed ? 'Updating' : 'Creating');
    this.resources.set(key(path), { id: path, body: stored });
    const operation = this.startOperation(
      path,
      () => this.provisioned(path),
      asyncError,
      this.isScaleSet(path) ? () => this.scaleSetProgress(path) : undefined,
    );
    return { status: existed ? 200 : 201, body: stored, headers: { 'Azure-AsyncOperation': operation } };
  }

  /** Updating one scale-set VM: what the fake models of it is its own network configuration (see the header). */
  private putVm(path: string, body: Record<string, unknown>, asyncError?: Fault['asyncError']): Reply {
    const stored = this.resources.get(key(path));
    if (!stored) return notFound(path);
    const nics = (body.properties as { networkProfileConfiguration?: unknown } | undefined)
      ?.networkProfileConfiguration;
    const invalid = nics ? this.checkReferences(path, { nics }) : undefined;
    if (invalid) return invalid;
    const props = stored.body.properties as Record<string, unknown>;
    const apply = () => {
      if (nics) props.networkProfileConfiguration = structuredClone(nics);
      props.provisioningState = 'Succeeded';
    };
    props.provisioningState = 'Updating';
    const operation = this.startOperation(path, apply, asyncError);
    return { status: 200, body: stored.body, headers: { 'Azure-AsyncOperation': operation } };
  }

  private patch(path: string, body: Record<string, unknown>, asyncError?: Fault['asyncError']): Reply {
    const stored = this.resources.get(key(path));
    if (!stored) return notFound(path);
    stored.body = deepMerge(stored.body, body);
    (stored.body.properties as Record<string, unknown>).provisioningState = 'Updating';
    const operation = this.startOperation(
      path,
      () => this.provisioned(path),
      asyncError,
      this.isScaleSet(path) ? () => this.scaleSetProgress(path) : undefined,
    );
    return { status: 200, body: stored.body, headers: { 'Azure-AsyncOperation': operation } };
  }

  /** A long-running create or update finished: the resource is Succeeded; scale sets get their VMs. */
  private provisioned(path: string): void {
    const stored = this.resources.get(key(path));
    if (!stored) return;
    (stored.body.properties as Record<string, unknown>).provisioningState = 'Succeeded';
    if (typeOf(path).toLowerCase() === 'microsoft.compute/virtualmachinescalesets') this.reconcileScaleSet(path);
  }

  private isScaleSet(path: string): boolean {
    return typeOf(path).toLowerCase() === 'microsoft.compute/virtualmachinescalesets';
  }

  private scaleSetVms(path: string): Stored[] {
    const prefix = key(path) + '/virtualmachines/';
    return [...this.resources.entries()].filter(([k]) => k.startsWith(prefix)).map(([, v]) => v);
  }

  private reconcileScaleSet(path: string): void {
    const stored = this.resources.get(key(path))!;
    const capacity = Number((stored.body.sku as { capacity?: number } | undefined)?.capacity ?? 0);
    const vms = this.scaleSetVms(path);
    const model = ((stored.body.properties as Record<string, unknown>).virtualMachineProfile ?? {}) as Record<
      string,
      unknown
    >;
    const prefix = String(
      (
        (stored.body.properties as Record<string, unknown>).virtualMachineProfile as
          { osProfile?: { computerNamePrefix?: string } } | undefined
      )?.osProfile?.computerNamePrefix ?? segmentsOf(path).at(-1),
    );
    for (let n = vms.length; n < capacity; n++) {
      const instance = this.nextInstance.get(key(path)) ?? 0;
      this.nextInstance.set(key(path), instance + 1);
      const id = `${path}/virtualMachines/${instance}`;
      this.resources.set(key(id), {
        id,
        body: {
          id,
          name: `${segmentsOf(path).at(-1)}_${instance}`,
          type: 'Microsoft.Compute/virtualMachineScaleSets/virtualMachines',
          instanceId: String(instance),
          location: stored.body.location,
          properties: {
            provisioningState: 'Creating',
            // Each VM's unique id (a UUID Azure assigns; IMDS reports it as compute.vmId).
            vmId: randomUUID(),
            timeCreated: new Date().toISOString(),
            latestModelApplied: true,
            storageProfile: {
              imageReference: structuredClone(
                (model.storageProfile as { imageReference?: unknown } | undefined)?.imageReference ?? {},
              ),
            },
            osProfile: { computerName: `${prefix}${instance.toString(36).padStart(6, '0')}` },
            privateIp: `${this.privateIpBase}.${this.nextIp++}`,
          },
        },
      });
      this.provisioning.set(key(id), { createdAt: Date.now(), reported: false });
    }
    this.tick();
    const surplus = vms.length - capacity;
    if (surplus > 0) {
      // The scale-in policy (see the header): Default deletes the highest instance ids (one zone, one fault domain).
      const rule = ((stored.body.properties as { scaleInPolicy?: { rules?: string[] } }).scaleInPolicy?.rules ?? [
        'Default',
      ])[0];
      const byId = vms.sort((a, b) => Number(b.body.instanceId) - Number(a.body.instanceId));
      const byAge = [...vms].sort((a, b) =>
        String((b.body.properties as { timeCreated: string }).timeCreated).localeCompare(
          String((a.body.properties as { timeCreated: string }).timeCreated),
        ),
      );
      const victims = rule === 'OldestVM' ? byAge.reverse() : rule === 'NewestVM' ? byAge : byId;
      for (const vm of victims.slice(0, surplus)) this.resources.delete(key(vm.id));
    }
  }

  private listScaleSetNics(path: string): Reply {
    const vmss = path.replace(/\/networkInterfaces$/i, '');
    const value = this.scaleSetVms(vmss).map((vm) => ({
      id: `${vm.id}/networkInterfaces/node-nic`,
      name: 'node-nic',
      properties: {
        primary: true,
        virtualMachine: { id: vm.id },
        ipConfigurations: [
          {
            id: `${vm.id}/networkInterfaces/node-nic/ipConfigurations/node-ip`,
            name: 'node-ip',
            properties: { primary: true, privateIPAddress: (vm.body.properties as { privateIp: string }).privateIp },
          },
        ],
      },
    }));
    return { status: 200, body: { value } };
  }

  private listByTag(path: string, query: URLSearchParams): Reply {
    const group = key(path.replace(/\/resources$/i, ''));
    const filter = /tagName eq '([^']+)' and tagValue eq '([^']+)'/.exec(query.get('$filter') ?? '');
    const value = [...this.resources.values()]
      .filter((r) => key(r.id).startsWith(group + '/providers/') && segmentsOf(r.id).length === 8)
      .filter((r) => !filter || (r.body.tags as Record<string, string> | undefined)?.[filter[1]] === filter[2])
      .map((r) => ({ id: r.id, name: r.body.name, type: r.body.type, location: r.body.location, tags: r.body.tags }));
    return { status: 200, body: { value } };
  }

  /** Resources (other than `path` and its children) whose body refers to `path` or one of its sub-resources. */
  private usersOf(path: string): string[] {
    const target = key(path);
    return [...this.resources.values()]
      .filter((r) => !key(r.id).startsWith(target))
      .filter((r) => referencedIds(r.body).some((ref) => key(topLevelOf(ref)) === target))
      .map((r) => r.id);
  }

  private delete(path: string, asyncError?: Fault['asyncError']): Reply {
    const vmMatch = /^(.*\/virtualMachineScaleSets\/[^/]+)\/virtualMachines\/([^/]+)$/i.exec(path);
    const stored = this.resources.get(key(path));
    if (!stored) return segmentsOf(path).length === 4 ? notFound(path) : { status: 204 };
    const users = vmMatch ? [] : this.usersOf(path);
    if (users.length > 0 && segmentsOf(path).length > 4) {
      const type = String(stored.body.type).split('/').pop();
      return error(
        400,
        'InUseResourceCannotBeDeleted',
        `${type} ${path} is in use by ${users.join(', ')} and cannot be deleted.`,
      );
    }
    const remove = () => {
      const prefix = key(path);
      for (const k of [...this.resources.keys()])
        if (k === prefix || k.startsWith(prefix + '/')) this.resources.delete(k);
      if (vmMatch) {
        const set = this.resources.get(key(vmMatch[1]));
        const sku = set?.body.sku as { capacity?: number } | undefined;
        if (sku?.capacity) sku.capacity -= 1;
      }
    };
    if (segmentsOf(path).length === 4) {
      // Resource groups: Location-header polling, as Azure does.
      const operation = this.startOperation(path, remove, asyncError).replace('/operations/', '/operationresults/');
      return { status: 202, headers: { Location: operation } };
    }
    if (!this.isLongRunning(path)) {
      remove();
      return { status: 200, body: stored.body };
    }
    (stored.body.properties as Record<string, unknown>).provisioningState = 'Deleting';
    const operation = this.startOperation(path, remove, asyncError);
    return { status: 202, headers: { 'Azure-AsyncOperation': operation, Location: operation } };
  }
}

/** The wire server's container id of a VM: stable per VM, as Azure's is per VM deployment. */
function containerIdOf(vmId: string): string {
  let h = 0;
  for (const c of vmId.toLowerCase()) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `c${h.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000`;
}

function error(status: number, code: string, message: string): Reply {
  return { status, body: { error: { code, message } } };
}

function notFound(path: string): Reply {
  const segs = segmentsOf(path);
  if (segs.length === 4) return error(404, 'ResourceGroupNotFound', `Resource group '${segs[3]}' could not be found.`);
  return error(
    404,
    'ResourceNotFound',
    `The Resource '${typeOf(path)}/${segs.at(-1)}' under resource group '${segs[3]}' was not found.`,
  );
}
