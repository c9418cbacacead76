/**
 * The Azure InfrastructureProvider (providers/contract.ts): keeps one set of SDK clients per subscription and wires
 * them to the create (./create.ts), instance (list, scale, add, remove, drain, markInitialized: ./instances.ts) and
 * terminate (./terminate.ts) logic. Loaded lazily by providers/azure/index.ts.
 */
import type {
  CreateRequest,
  CreateResult,
  Instance,
  InfrastructureProvider,
  ProviderContext,
  TerminateOptions,
} from '../contract.js';
import { createAzureClients, type AzureClients } from './clients.js';
import { AzureCreate } from './create.js';
import { AzureInstances } from './instances.js';
import type { AzureProviderOptions } from './options.js';
import { AzureTerminate } from './terminate.js';

export class AzureInfrastructure implements InfrastructureProvider {
  readonly name = 'azure';
  private readonly clientCache = new Map<string, Promise<AzureClients>>();
  private readonly instances: AzureInstances;

  constructor(private readonly options: AzureProviderOptions = {}) {
    this.instances = new AzureInstances(options, (subscription) => this.clients(subscription));
  }

  create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    return new AzureCreate(this.options, (subscription) => this.clients(subscription)).run(request, ctx);
  }

  listInstances(ctx: ProviderContext): Promise<Instance[]> {
    return this.instances.listInstances(ctx);
  }

  scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    return this.instances.scaleNodeGroup(nodeGroup, count, ctx);
  }

  addInstance(nodeGroup: string, ctx: ProviderContext): Promise<Instance> {
    return this.instances.addInstance(nodeGroup, ctx);
  }

  drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    return this.instances.drainInstance(id, ctx);
  }

  removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    return this.instances.removeInstance(id, ctx);
  }

  markInitialized(ctx: ProviderContext): Promise<void> {
    return this.instances.markInitialized(ctx);
  }

  terminate(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    return new AzureTerminate(this.options, (subscription) => this.clients(subscription)).run(ctx, options);
  }

  /** The SDK clients for a subscription, made once per provider instance. */
  private clients(subscription: string): Promise<AzureClients> {
    let clients = this.clientCache.get(subscription);
    if (!clients) {
      clients = createAzureClients(subscription, this.options);
      this.clientCache.set(subscription, clients);
    }
    return clients;
  }
}
