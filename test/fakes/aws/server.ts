/**
 * A fake AWS on 127.0.0.1 for tests and benchmarks: one HTTP server that speaks EC2, Elastic Load Balancing
 * v2, Auto Scaling and IAM (the unmodified SDK clients point their `endpoint` at it; the service is read from
 * the SigV4 credential scope) and the instance metadata service (IMDSv2, under /latest/).
 * It keeps state (./state.ts), emulates long-running operations (`lroMs`), adds a fixed latency per call
 * (`latencyMs`), checks the access key, logs every request, and answers with injected faults (throttling,
 * quota, any AWS error) so tests can assert on what the provider sent and how it reacts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { autoscalingHandlers } from './autoscaling.js';
import { ec2Handlers } from './ec2.js';
import { elbHandlers } from './elb.js';
import { iamHandlers } from './iam.js';
import { FakeAwsState, type Image } from './state.js';
import type { InjectedErrors } from '../injected.js';
import { AwsFault, errorBody, parseForm, responseBody, type Params, type XmlValue } from './wire.js';

export const FAKE_CREDENTIALS = { accessKeyId: 'AKIDFAKEAWS0000TEST', secretAccessKey: 'fake-secret-access-key' };
export const FAKE_IMAGE = 'ami-0c0ffee0c0ffee000';

type Handler = (s: FakeAwsState, p: Params) => Record<string, XmlValue>;
const HANDLERS: Record<string, Record<string, Handler>> = {
  ec2: ec2Handlers,
  elasticloadbalancing: elbHandlers,
  autoscaling: autoscalingHandlers,
  iam: iamHandlers,
};

export interface RecordedRequest {
  service: string;
  action: string;
  params: Params;
  at: number;
  /** The error code the fake answered with, if it refused the request. */
  error?: string;
}

export interface InjectedFault {
  action: string;
  service?: string;
  code: string;
  message: string;
  status?: number;
  /** How many matching requests fail (default 1). */
  times?: number;
}

export interface FakeAwsOptions {
  latencyMs?: number;
  lroMs?: number;
  images?: Image[];
  /** First two octets of instances' private and of elastic IPs (cloud in a box: loopback addresses nodes can bind). */
  privateIpBase?: string;
  publicIpBase?: string;
  /** EC2 eventual consistency window after a create (FakeAwsState.consistencyMs); default 0. */
  consistencyMs?: number;
  /** The same in calls: how many calls naming a new resource do not find it (FakeAwsState.consistencyMisses); default 0. */
  consistencyMisses?: number;
  /** How long a deregistered target drains (default lroMs). */
  drainMs?: number;
}

export class FakeAws {
  readonly requests: RecordedRequest[] = [];
  readonly state: FakeAwsState;
  /** What the instance metadata service answers for (the node side's "self"). */
  readonly imds: { instanceId?: string; tokens: Set<string> } = { tokens: new Set() };
  /** Called for each API request before it is handled (tests use it to interrupt a run at a chosen point). */
  onRequest?: (request: RecordedRequest) => void;
  latencyMs: number;
  private faults: InjectedFault[] = [];
  private server?: http.Server;
  url = '';

  constructor(options: FakeAwsOptions = {}) {
    this.latencyMs = options.latencyMs ?? 0;
    this.state = new FakeAwsState(options.lroMs ?? 20);
    this.state.privateIpBase = options.privateIpBase;
    this.state.publicIpBase = options.publicIpBase;
    this.state.consistencyMs = options.consistencyMs ?? 0;
    this.state.consistencyMisses = options.consistencyMisses ?? 0;
    this.state.drainMs = options.drainMs;
    for (const image of options.images ?? [{ id: FAKE_IMAGE, bootMode: 'uefi', tpmSupport: 'v2.0' }])
      this.state.images.set(image.id, image);
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }

  /** The next `times` requests of `action` fail with this AWS error. */
  fail(fault: InjectedFault): void {
    this.faults.push({ times: 1, ...fault });
  }

  /** What the fake answered on purpose so far (eventual-consistency NotFound, injected faults), per kind. */
  get injected(): InjectedErrors {
    return this.state.injected;
  }

  calls(action: string): RecordedRequest[] {
    return this.requests.filter((r) => r.action === action);
  }

  /** Resources still alive ("type id"); empty after a complete terminate. */
  live(): string[] {
    return this.state.liveResources();
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    if (req.url?.startsWith('/latest/') || req.url?.startsWith('/node/')) return this.handleImds(req, res);

    const scope = /Credential=([^/]+)\/[^/]+\/([^/]+)\/([^/]+)\//.exec(req.headers.authorization ?? '');
    const service = scope?.[3] ?? 'unknown';
    const send = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'text/xml' });
      res.end(text);
    };
    const { action, params } = parseForm(body);
    const request: RecordedRequest = { service, action, params, at: Date.now() };
    this.requests.push(request);
    if (!scope)
      return send(
        403,
        errorBody(service, new AwsFault('MissingAuthenticationToken', 'Request is missing Authentication Token', 403)),
      );
    if (scope[1] !== FAKE_CREDENTIALS.accessKeyId) {
      const fault =
        service === 'ec2'
          ? new AwsFault('AuthFailure', 'AWS was not able to validate the provided access credentials', 401)
          : new AwsFault('InvalidClientTokenId', 'The security token included in the request is invalid.', 403);
      return send(fault.status, errorBody(service, fault));
    }
    if (this.latencyMs > 0) await sleep(this.latencyMs);
    try {
      this.onRequest?.(request);
      const fault = this.faults.find(
        (f) => f.action === action && (!f.service || f.service === service) && (f.times ?? 0) > 0,
      );
      if (fault) {
        fault.times = (fault.times ?? 1) - 1;
        this.state.injected.hit(fault.code);
        throw new AwsFault(fault.code, fault.message, fault.status ?? 400);
      }
      const handler = HANDLERS[service]?.[action];
      if (!handler) throw new AwsFault('InvalidAction', `The action ${action} is not valid for this web service.`);
      send(200, responseBody(service, action, handler(this.state, params)));
    } catch (err) {
      const fault =
        err instanceof AwsFault ? err : new AwsFault('InternalError', String((err as Error).stack ?? err), 500);
      request.error = fault.code;
      send(fault.status, errorBody(service, fault));
    }
  }

  /** IMDSv2: PUT /latest/api/token, then GETs carrying the token. */
  private handleImds(req: http.IncomingMessage, res: http.ServerResponse): void {
    const reply = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(text);
    };
    // /node/<instance id>/latest/...: the IMDS of that instance (cloud in a box: one endpoint per node).
    const perNode = /^\/node\/([^/]+)(\/latest\/.*)$/.exec(req.url ?? '');
    const url = perNode ? perNode[2] : req.url;
    if (req.method === 'PUT' && url === '/latest/api/token') {
      if (!req.headers['x-aws-ec2-metadata-token-ttl-seconds']) return reply(400, 'missing ttl');
      const token = `token-${this.imds.tokens.size + 1}`;
      this.imds.tokens.add(token);
      return reply(200, token);
    }
    if (!this.imds.tokens.has(String(req.headers['x-aws-ec2-metadata-token'] ?? ''))) return reply(401, 'Unauthorized');
    const instanceId = perNode ? perNode[1] : this.imds.instanceId;
    const instance = instanceId ? this.state.instances.get(instanceId) : undefined;
    if (!instance) return reply(404, 'Not Found');
    const answers: Record<string, string> = {
      '/latest/meta-data/instance-id': instance.id,
      '/latest/meta-data/placement/region': this.state.region,
      '/latest/meta-data/placement/availability-zone': instance.zone,
      '/latest/meta-data/local-ipv4': instance.privateIp,
      '/latest/dynamic/instance-identity/document': JSON.stringify({
        accountId: '123456789012',
        architecture: 'x86_64',
        availabilityZone: instance.zone,
        imageId: instance.imageId,
        instanceId: instance.id,
        instanceType: instance.instanceType,
        privateIp: instance.privateIp,
        region: this.state.region,
        version: '2017-09-30',
      }),
    };
    const answer = answers[url ?? ''];
    return answer === undefined ? reply(404, 'Not Found') : reply(200, answer);
  }
}

export function startFakeAws(options: FakeAwsOptions = {}): Promise<FakeAws> {
  return new FakeAws(options).start();
}
