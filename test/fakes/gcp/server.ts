/**
 * A fake Google Cloud on 127.0.0.1 for the GCP provider's tests and bench: one HTTP server speaking the
 * Compute API (./compute.ts), IAM and Resource Manager (./iam.ts) and the instance metadata server, so the
 * unmodified @google-cloud/compute client (apiEndpoint/port/protocol 'http') and google-auth-library's
 * OAuth2Client with a static token talk to it. It logs every request, checks the bearer token, adds a fixed
 * latency per call, and injects HTTP faults (throttling 429/503, permanent errors) and failing operations.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { OAuth2Client } from 'google-auth-library';
import type { GcpProviderOptions } from '../../../providers/gcp/options.js';
import { FakeCompute, type OperationFault, type ShieldedIdentity } from './compute.js';
import { HttpError, type FakeRequest, type FakeResponse } from './http.js';
import { FakeIam } from './iam.js';
import type { InjectedErrors } from '../injected.js';

export interface FakeGcpOptions {
  /** Added to every call before it is answered. */
  latencyMs?: number;
  /** How long an operation runs. */
  operationMs?: number;
  /** How long a `wait` call blocks at most (GCP: about two minutes). */
  waitTimeoutMs?: number;
  /** First three octets of instances' internal and of reserved addresses (cloud in a box: loopback addresses). */
  privateIpBase?: string;
  publicIpBase?: string;
}

export interface HttpFault {
  /** Matched against "METHOD /path?query". */
  match: RegExp;
  status: number;
  message?: string;
  reason?: string;
  grpcStatus?: string;
  /** How many matching calls fail (default 1). */
  times?: number;
}

export interface LoggedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
}

/** One HTTP request from arrival to answer (performance.now() milliseconds), for measuring concurrency. */
interface RequestSpan {
  line: string;
  start: number;
  end: number;
}

/** Requests held until `count` of them are in flight (or the timeout passed); then every one is let through. */
class Gate {
  private readonly waiting: (() => void)[] = [];
  private timer?: NodeJS.Timeout;
  private open = false;

  constructor(
    readonly match: RegExp,
    private readonly count: number,
    private readonly timeoutMs: number,
  ) {}

  arrive(): Promise<void> {
    if (this.open) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (this.waiting.length >= this.count) this.release();
      else this.timer ??= setTimeout(() => this.release(), this.timeoutMs);
    });
  }

  release(): void {
    this.open = true;
    clearTimeout(this.timer);
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}

export const FAKE_TOKEN = 'fake-gcp-access-token';

export class FakeGcp {
  readonly requests: LoggedRequest[] = [];
  /** Every answered request's "METHOD path" and when it arrived and was answered (latency included). */
  private readonly spans: RequestSpan[] = [];
  private gate?: Gate;
  readonly compute: FakeCompute;
  readonly iam = new FakeIam();
  latencyMs: number;
  operationMs: number;
  private readonly faults: HttpFault[] = [];
  private metadataInstance?: { project: string; zone: string; name: string };
  private port = 0;
  /** google-auth-library's OAuth2Client with a static token: the SDK's real auth path, no token endpoint. */
  private readonly authClient = new OAuth2Client();

  private constructor(
    private readonly server: http.Server,
    options: FakeGcpOptions,
  ) {
    this.latencyMs = options.latencyMs ?? 0;
    this.operationMs = options.operationMs ?? 0;
    this.authClient.setCredentials({ access_token: FAKE_TOKEN, expiry_date: Date.now() + 24 * 3600_000 });
    this.compute = new FakeCompute(
      () => this.url,
      () => this.operationMs,
      options.waitTimeoutMs ?? 2000,
      { privateIpBase: options.privateIpBase, publicIpBase: options.publicIpBase },
    );
  }

  static async start(options: FakeGcpOptions = {}): Promise<FakeGcp> {
    const server = http.createServer();
    const fake = new FakeGcp(server, options);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => void fake.serve(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fake.port = (server.address() as AddressInfo).port;
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * The environment that points a CLI child's GCP clients at this fake through their default paths: gcloud's
   * Compute endpoint override and application default credentials from the (fake) GCE metadata server.
   */
  cliEnv(): NodeJS.ProcessEnv {
    return {
      CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE: `${this.url}/`,
      GCE_METADATA_HOST: `127.0.0.1:${this.port}`,
      METADATA_SERVER_DETECTION: 'assume-present',
      GOOGLE_APPLICATION_CREDENTIALS: '',
      GOOGLE_CLOUD_PROJECT: 'fake-project',
    };
  }

  /** Provider options that point the real SDK at this fake, with short retry delays. */
  providerOptions(extra: Partial<GcpProviderOptions> = {}): GcpProviderOptions {
    return {
      apiEndpoint: '127.0.0.1',
      port: this.port,
      protocol: 'http',
      authClient: this.authClient,
      iamEndpoint: this.url,
      resourceManagerEndpoint: this.url,
      metadataEndpoint: this.url,
      retry: { attempts: 5, baseDelayMs: 1, maxDelayMs: 5 },
      pollIntervalMs: 5,
      inUseRetries: 3,
      propagation: { attempts: 6, baseDelayMs: 1, maxDelayMs: 5 },
      ...extra,
    };
  }

  /** Forgets all state, faults and logged requests (tests share one fake and its clients). */
  reset(options: FakeGcpOptions = {}): void {
    this.compute.reset();
    this.iam.reset();
    this.faults.length = 0;
    this.requests.length = 0;
    this.spans.length = 0;
    this.gate?.release();
    this.gate = undefined;
    this.latencyMs = options.latencyMs ?? 0;
    this.operationMs = options.operationMs ?? 0;
    this.metadataInstance = undefined;
  }

  /** What the fake answered on purpose so far, per kind (injected faults, resourceNotReady, PROVISIONING). */
  get injected(): InjectedErrors {
    return this.compute.injected;
  }

  inject(fault: HttpFault): void {
    this.faults.push({ times: 1, ...fault });
  }

  failOperation(fault: OperationFault): void {
    this.compute.failOperation(fault);
  }

  setShieldedIdentity(instanceName: string, identity: ShieldedIdentity): void {
    this.compute.setShieldedIdentity(instanceName, identity);
  }

  /** Which instance the metadata server answers for. */
  setMetadataInstance(instance: { project: string; zone: string; name: string }): void {
    this.metadataInstance = instance;
  }

  /**
   * The most requests whose "METHOD path" matches that were in flight at once (arrived, not yet answered) since the
   * last reset: what a client sends concurrently, as the server sees it. A request answered at once is rarely seen
   * in flight beside another: hold them (holdUntilInFlight) or add a latency (latencyMs).
   */
  maxInFlight(match: RegExp): number {
    const events = this.spans
      .filter((s) => match.test(s.line))
      .flatMap((s) => [
        { at: s.start, delta: 1 },
        { at: s.end, delta: -1 },
      ])
      // An answer at the same moment as an arrival ends first: the two were not in flight together.
      .sort((a, b) => a.at - b.at || a.delta - b.delta);
    let inFlight = 0;
    let max = 0;
    for (const e of events) max = Math.max(max, (inFlight += e.delta));
    return max;
  }

  /**
   * Holds requests whose "METHOD path" matches until `count` of them are in flight, then answers them all; after
   * `timeoutMs` it lets through whatever waits, and from then on nothing is held. A client that sends them
   * concurrently has all `count` in flight at once (maxInFlight), however loaded the machine; one that sends them one
   * after another has one, and waits `timeoutMs` once.
   */
  holdUntilInFlight(match: RegExp, count: number, timeoutMs: number): void {
    this.gate?.release();
    this.gate = new Gate(match, count, timeoutMs);
  }

  /** Requests whose "METHOD path" matches. */
  calls(match: RegExp): LoggedRequest[] {
    return this.requests.filter((r) => match.test(`${r.method} ${r.path}`));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const start = performance.now();
    const line = `${req.method ?? 'GET'} ${(req.url ?? '/').split('?')[0]}`;
    let response: FakeResponse;
    try {
      if (this.gate?.match.test(line)) await this.gate.arrive();
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const raw = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', this.url);
      const request: FakeRequest = {
        method: req.method ?? 'GET',
        path: decodeURIComponent(url.pathname),
        query: url.searchParams,
        body: raw ? JSON.parse(raw) : undefined,
        headers: req.headers,
      };
      if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
      response = await this.route(request, `${request.method} ${url.pathname}${url.search}`);
    } catch (err) {
      const httpError = err instanceof HttpError ? err : new HttpError(500, (err as Error).message, 'backendError');
      response = { status: httpError.status, body: httpError.toBody() };
    }
    this.spans.push({ line, start, end: performance.now() });
    res.statusCode = response.status;
    if (response.text) {
      res.setHeader('content-type', 'application/text');
      res.setHeader('metadata-flavor', 'Google');
      res.end(String(response.body));
    } else {
      res.setHeader('content-type', 'application/json; charset=UTF-8');
      if (req.url?.startsWith('/computeMetadata/')) res.setHeader('metadata-flavor', 'Google');
      res.end(JSON.stringify(response.body));
    }
  }

  private async route(req: FakeRequest, line: string): Promise<FakeResponse> {
    if (req.path.startsWith('/computeMetadata/')) return this.metadata(req);
    // /node/<instance name>/computeMetadata/v1/...: that instance's metadata server (cloud in a box: one per node).
    const perNode = /^\/node\/([^/]+)(\/computeMetadata\/.*)$/.exec(req.path);
    if (perNode) return this.metadata({ ...req, path: perNode[2] }, perNode[1]);
    if (req.headers.authorization !== `Bearer ${FAKE_TOKEN}`) {
      throw new HttpError(
        401,
        'Request had invalid authentication credentials. Expected OAuth 2 access token.',
        undefined,
        'UNAUTHENTICATED',
      );
    }
    this.requests.push({ method: req.method, path: req.path, query: Object.fromEntries(req.query), body: req.body });
    const fault = this.faults.find((f) => (f.times ?? 1) > 0 && f.match.test(line));
    if (fault) {
      fault.times = (fault.times ?? 1) - 1;
      this.injected.hit([fault.status, fault.reason].filter(Boolean).join(' '));
      throw new HttpError(fault.status, fault.message ?? defaultMessage(fault.status), fault.reason, fault.grpcStatus);
    }
    const response = (await this.compute.handle(req)) ?? this.iam.handle(req);
    if (!response) throw new HttpError(404, `No route for ${req.method} ${req.path}`, 'notFound');
    return response;
  }

  /** Project and zone of the instance called `name`, from its resource key (projects/P/zones/Z/instances/N). */
  private instanceLocation(name: string): { project: string; zone: string; name: string } | undefined {
    const key = [...this.compute.resources.keys()].find((k) => k.endsWith(`/instances/${name}`));
    const m = key && /^projects\/([^/]+)\/zones\/([^/]+)\/instances\//.exec(key);
    return m ? { project: m[1], zone: m[2], name } : undefined;
  }

  /** The instance metadata server (computeMetadata/v1), for the instance set with setMetadataInstance. */
  private metadata(req: FakeRequest, instanceName?: string): FakeResponse {
    if (req.headers['metadata-flavor'] !== 'Google') throw new HttpError(403, 'Missing Metadata-Flavor:Google header.');
    // Application default credentials on a VM (google-auth-library's GCE path): the service account's token.
    if (req.path === '/computeMetadata/v1/instance/service-accounts/default/token') {
      return { status: 200, body: { access_token: FAKE_TOKEN, expires_in: 3600, token_type: 'Bearer' } };
    }
    if (req.path === '/computeMetadata/v1/instance' || req.path === '/computeMetadata/v1/')
      return { status: 200, body: {} };
    const self = instanceName ? this.instanceLocation(instanceName) : this.metadataInstance;
    if (!self) throw new HttpError(404, 'no instance');
    const instance = this.compute.list('instances').find((i) => i.name === self.name) as
      | {
          id: string;
          name: string;
          networkInterfaces: { networkIP: string }[];
          metadata?: { items?: { key: string; value: string }[] };
        }
      | undefined;
    if (!instance) throw new HttpError(404, `instance ${self.name} does not exist`);
    const path = req.path.replace(/^\/computeMetadata\/v1\//, '');
    const attribute = /^instance\/attributes\/(.+)$/.exec(path);
    const text = (body: string): FakeResponse => ({ status: 200, body, text: true });
    if (attribute) {
      const item = instance.metadata?.items?.find((i) => i.key === attribute[1]);
      if (!item) throw new HttpError(404, 'not found');
      return text(item.value);
    }
    switch (path) {
      case 'project/project-id':
        return text(self.project);
      case 'instance/name':
        return text(instance.name);
      case 'instance/id':
        return text(instance.id);
      case 'instance/zone':
        return text(`projects/123456789/zones/${self.zone}`);
      case 'instance/network-interfaces/0/ip':
        return text(instance.networkInterfaces[0]?.networkIP ?? '');
      default:
        throw new HttpError(404, 'not found');
    }
  }
}

function defaultMessage(status: number): string {
  if (status === 429) return 'Rate Limit Exceeded';
  if (status === 503) return 'The service is currently unavailable.';
  return `Error ${status}`;
}
