/**
 * The GCP InfrastructureProvider (providers/contract.ts): keeps one set of Compute clients per credentials file and
 * wires them to the create (./create.ts), instance (list, scale, add, remove, drain, markInitialized:
 * ./instances.ts) and terminate (./terminate.ts) logic. Loaded lazily by providers/gcp/index.ts.
 */
import type {
  CreateRequest,
  CreateResult,
  Instance,
  InfrastructureProvider,
  ProviderContext,
  TerminateOptions,
} from '../contract.js';
import { GcpCompute } from './clients.js';
import { GcpCreate } from './create.js';
import { GcpInstances } from './instances.js';
import type { GcpProviderOptions } from './options.js';
import { terminateRecorded } from './terminate.js';

export class GcpInfrastructure implements InfrastructureProvider {
  readonly name = 'gcp';
  private readonly apis = new Map<string, Promise<GcpCompute>>();
  private readonly instances: GcpInstances;

  constructor(private readonly options: GcpProviderOptions = {}) {
    this.instances = new GcpInstances(options, (ctx, fn) => this.withApi(ctx, fn));
  }

  create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    return new GcpCreate(this.options, (keyFile) => this.api(keyFile)).run(request, ctx);
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

  async terminate(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    await this.withApi(ctx, async (api) => {
      await api.checkCredentials();
      await terminateRecorded(api, await ctx.journal.list(), ctx, {
        byTag: options.byTag === true,
        providerOptions: this.options,
      });
    });
  }

  /** The Compute clients for a credentials file (or the options' credentials), made once per provider instance. */
  private api(keyFile: string | undefined): Promise<GcpCompute> {
    const key = keyFile ?? '';
    let api = this.apis.get(key);
    if (!api) {
      api = GcpCompute.open(this.options, keyFile);
      this.apis.set(key, api);
    }
    return api;
  }

  /** Runs fn with the clients for the credentials file create recorded (the CLI may also pass options.keyFilename). */
  private async withApi<T>(ctx: ProviderContext, fn: (api: GcpCompute) => Promise<T>): Promise<T> {
    const records = await ctx.journal.list();
    const keyFile = records.map((r) => r.data?.serviceAccountKeyPath).find((p): p is string => typeof p === 'string');
    return fn(await this.api(keyFile));
  }
}
