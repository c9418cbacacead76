/**
 * The AWS InfrastructureProvider (providers/contract.ts): wires the SDK clients made for each call to the
 * create, instance (list, scale, add, remove, drain, markInitialized: ./instances.ts) and terminate logic. Loaded lazily by providers/aws/index.ts.
 */
import type {
  CreateRequest,
  CreateResult,
  Instance,
  InfrastructureProvider,
  ProviderContext,
  TerminateOptions,
} from '../contract.js';
import { AwsClients } from './clients.js';
import { AwsCreate } from './create.js';
import { AwsInstances } from './instances.js';
import type { AwsProviderOptions } from './options.js';
import { AwsTerminate } from './terminate.js';

export class AwsInfrastructure implements InfrastructureProvider {
  readonly name = 'aws';

  constructor(private readonly options: AwsProviderOptions = {}) {}

  create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    return this.withClients(ctx, (clients) => new AwsCreate(request, ctx, clients, this.options).run());
  }

  listInstances(ctx: ProviderContext): Promise<Instance[]> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).list());
  }

  scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).scale(nodeGroup, count));
  }

  addInstance(nodeGroup: string, ctx: ProviderContext): Promise<Instance> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).add(nodeGroup));
  }

  removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).remove(id));
  }

  drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).drain(id));
  }

  markInitialized(ctx: ProviderContext): Promise<void> {
    return this.withClients(ctx, (clients) => new AwsInstances(ctx, clients, this.options).markInitialized());
  }

  terminate(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    return this.withClients(ctx, (clients) => new AwsTerminate(ctx, clients, this.options).run(options.byTag ?? false));
  }

  /** Clients live for one call: they carry that call's logger and abort signal, and their sockets close after. */
  private async withClients<T>(ctx: ProviderContext, fn: (clients: AwsClients) => Promise<T>): Promise<T> {
    const clients = new AwsClients(this.options, ctx.log, ctx.signal);
    try {
      return await fn(clients);
    } finally {
      clients.destroy();
    }
  }
}
