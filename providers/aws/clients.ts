/**
 * The AWS SDK clients the provider uses (EC2, Elastic Load Balancing v2, Auto Scaling, IAM), made per region
 * with the provider options applied: endpoint overrides, static credentials or the default provider chain,
 * retry policy, instrumentation. Also the single place that runs an SDK call and turns its error into a
 * UserError naming what we were doing, and the waiter settings.
 * Loaded only when a provider method runs (providers/aws/index.ts imports it dynamically).
 */
import { AutoScalingClient } from '@aws-sdk/client-auto-scaling';
import { EC2Client } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { IAMClient } from '@aws-sdk/client-iam';
import { setMaxListeners } from 'node:events';
import type { ProviderLogger } from '../contract.js';
import { toUserError } from './errors.js';
import type { AwsProviderOptions, AwsService } from './options.js';
import { currentTask, whileWaiting } from '../common/task-graph.js';

// The SDK warns on every run that its releases after January 2027 need Node 22; this project pins SDK
// versions that run on Node 20 (docs/design.md#environment), so the warning is noise for users.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** IAM is a global service; its API lives in us-east-1. */
const IAM_REGION = 'us-east-1';

/** A retry strategy with a fixed delay (tests); the SDK still decides which errors are retryable. */
function fixedDelayRetryStrategy(maxAttempts: number, delayMs: number) {
  const token = (count: number) => ({ getRetryCount: () => count, getRetryDelay: () => delayMs });
  type Token = ReturnType<typeof token>;
  return {
    mode: 'standard',
    acquireInitialRetryToken: async () => token(0),
    refreshRetryTokenForRetry: async (previous: Token, info: { errorType: string }) => {
      if (info.errorType === 'CLIENT_ERROR' || previous.getRetryCount() + 1 >= maxAttempts) {
        throw new Error('no retry'); // the SDK then throws the original error
      }
      return token(previous.getRetryCount() + 1);
    },
    recordSuccess: () => undefined,
  };
}

interface SendingClient {
  send(command: unknown, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  config: { credentials: () => Promise<unknown> };
  middlewareStack: { add: (mw: unknown, options: { step: string; name: string }) => void };
  destroy(): void;
}

export interface WaiterParams<C> {
  client: C;
  minDelay: number;
  maxDelay: number;
  maxWaitTime: number;
  abortSignal?: AbortSignal;
}

export class AwsClients {
  private readonly cache = new Map<string, SendingClient>();
  /** Follows the caller's signal; every concurrent call listens on it, so it may have many listeners. */
  private readonly abort = new AbortController();
  private readonly signal: AbortSignal = this.abort.signal;
  private readonly unlink: () => void;

  constructor(
    private readonly options: AwsProviderOptions,
    private readonly log?: ProviderLogger,
    callerSignal?: AbortSignal,
  ) {
    setMaxListeners(0, this.signal);
    const onAbort = () => this.abort.abort(callerSignal?.reason);
    if (callerSignal?.aborted) onAbort();
    callerSignal?.addEventListener('abort', onAbort, { once: true });
    this.unlink = () => callerSignal?.removeEventListener('abort', onAbort);
  }

  ec2(region: string): EC2Client {
    return this.client('ec2', region, (config) => new EC2Client(config)) as unknown as EC2Client;
  }

  elb(region: string): ElasticLoadBalancingV2Client {
    return this.client(
      'elbv2',
      region,
      (config) => new ElasticLoadBalancingV2Client(config),
    ) as unknown as ElasticLoadBalancingV2Client;
  }

  autoscaling(region: string): AutoScalingClient {
    return this.client(
      'autoscaling',
      region,
      (config) => new AutoScalingClient(config),
    ) as unknown as AutoScalingClient;
  }

  iam(): IAMClient {
    return this.client('iam', IAM_REGION, (config) => new IAMClient(config)) as unknown as IAMClient;
  }

  /**
   * Resolves credentials once, before anything is made, so a missing credential is one clear error
   * (naming what to set) instead of a failure in the middle of create.
   */
  async checkCredentials(region: string): Promise<void> {
    try {
      await (this.ec2(region) as unknown as SendingClient).config.credentials();
    } catch (err) {
      throw toUserError('Loading AWS credentials', err);
    }
  }

  /** Sends one command; errors become UserErrors that say what `action` was. */
  async send<T>(
    client: { send: (command: never, options?: never) => Promise<unknown> },
    command: unknown,
    action: string,
  ): Promise<T> {
    try {
      return (await (client as unknown as SendingClient).send(command, { abortSignal: this.signal })) as T;
    } catch (err) {
      throw toUserError(action, err);
    }
  }

  /** Runs an SDK waiter (`waitUntil...`) with our delays; a timeout or failure state becomes a UserError. */
  async wait<C, I>(
    waiter: (params: WaiterParams<C>, input: I) => Promise<unknown>,
    client: C,
    input: I,
    action: string,
  ): Promise<void> {
    const w = this.options.waiter ?? {};
    const minDelay = w.minDelaySeconds ?? 5;
    try {
      await whileWaiting(() =>
        waiter(
          {
            client,
            minDelay,
            maxDelay: Math.max(w.maxDelaySeconds ?? 30, minDelay),
            maxWaitTime: w.maxWaitSeconds ?? 20 * 60,
            abortSignal: this.signal,
          },
          input,
        ),
      );
    } catch (err) {
      const e = err as { name?: string; message?: string };
      const state = /"state":\s*"(\w+)"/.exec(e.message ?? '')?.[1];
      if (state || e.name === 'TimeoutError') {
        throw toUserError(
          action,
          new Error(state === 'TIMEOUT' ? 'timed out' : `ended in state ${state ?? 'FAILURE'}`),
        );
      }
      throw toUserError(action, err);
    }
  }

  destroy(): void {
    this.unlink();
    for (const c of this.cache.values()) c.destroy();
    this.cache.clear();
  }

  private client(
    service: AwsService,
    region: string,
    make: (config: Record<string, unknown>) => unknown,
  ): SendingClient {
    const key = `${service}/${region}`;
    let client = this.cache.get(key);
    if (client) return client;
    const o = this.options;
    const endpoint = o.endpoints?.[service] ?? o.endpoint;
    const config: Record<string, unknown> = { region };
    if (endpoint) config.endpoint = endpoint;
    if (o.credentials) config.credentials = o.credentials;
    if (o.retryDelayMs !== undefined)
      config.retryStrategy = fixedDelayRetryStrategy(o.maxAttempts ?? 3, o.retryDelayMs);
    else if (o.maxAttempts !== undefined) config.maxAttempts = o.maxAttempts;
    client = make(config) as SendingClient;
    client.middlewareStack.add(
      (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) => async (args: unknown) => {
        const operation = (context.commandName ?? 'unknown').replace(/Command$/, '');
        const task = currentTask();
        this.log?.debug('aws api call', { service, region, operation, step: task?.task });
        o.onApiCall?.({ service, operation, task: task?.task, waiting: task?.waiting ?? false });
        return next(args);
      },
      { step: 'initialize', name: 'constellationApiCallObserver' },
    );
    this.cache.set(key, client);
    return client;
  }
}
