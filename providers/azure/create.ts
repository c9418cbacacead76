/**
 * `create` on Azure: creates the plan of ./plan.ts with the official SDKs, each
 * resource as soon as the ones it depends on exist, and records every resource in the journal the moment Azure
 * accepts it (status "accepted"), then again when it is ready (with its outputs). Before the first PUT, the
 * subscription is registered for the resource providers the cluster needs (./resource-providers.ts). A re-run skips
 * what is ready and PUTs the rest again, which continues an interrupted create.
 */
import type { CreateRequest, CreateResult, ProviderContext } from '../contract.js';
import { lroOptions, type AzureClients } from './clients.js';
import { isAzureKind } from './deletion.js';
import { checkGalleryImage } from './gallery-image.js';
import { CreateFailedError, NoAzureCredentialsError, toUserError } from './errors.js';
import type { AzureProviderOptions } from './options.js';
import { NODE_SUBNET_CIDR, parseAzureConfig, planResources, type AzureConfig, type PlannedResource } from './plan.js';
import { CLUSTER_NAMESPACES, ensureRegistered } from './resource-providers.js';
import { throwawaySshPublicKey } from './ssh-key.js';
import { runTaskGraphRethrowingFirst as runTaskGraph } from '../common/task-graph.js';

/** What the journal keeps about each resource create made (./instances.ts and ./terminate.ts read it too). */
export interface RecordData {
  uid: string;
  status: 'accepted' | 'ready';
  output?: { ipAddress?: string };
  nodeGroup?: string;
  role?: string;
  sshPublicKey?: string;
}

export class AzureCreate {
  constructor(
    private readonly options: AzureProviderOptions,
    /** The SDK clients for a subscription (the provider keeps one set per subscription). */
    private readonly clients: (subscription: string) => Promise<AzureClients>,
  ) {}

  async run(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    const config = parseAzureConfig(request.providerConfig);
    const plan = planResources(request, config);
    const clients = await this.clients(config.subscription);
    // Nothing is made for an image the VMs cannot boot (./gallery-image.ts).
    await checkGalleryImage(clients, request.image, config.location, request.attestationVariant);
    const recorded = new Map((await ctx.journal.list()).map((r) => [r.id.toLowerCase(), r]));
    const idOfKey = new Map(plan.map((p) => [p.key, p.id]));
    // One throwaway key for all scale sets, generated while the network is being made (off the critical path).
    let sshKey: Promise<string> | undefined;
    const sshPublicKey = () => (sshKey ??= throwawaySshPublicKey());
    if (
      plan.some(
        (p) =>
          p.kind === 'azure:vmss' &&
          (recorded.get(p.id.toLowerCase())?.data as RecordData | undefined)?.status !== 'ready',
      )
    ) {
      sshPublicKey().catch(() => undefined);
    }

    const registration = {
      id: 'resource-providers',
      dependsOn: [],
      run: async () => {
        try {
          await ensureRegistered(clients.resources, CLUSTER_NAMESPACES, ctx, {
            sleep: this.options.sleep,
            pollIntervalMs: this.options.registrationPollMs,
          });
        } catch (err) {
          throw toUserError(err, 'registering the subscription for the resource providers');
        }
        return {};
      },
    };
    const tasks = plan.map((resource) => ({
      id: resource.key,
      // Nothing is PUT before the subscription is registered for the namespaces.
      dependsOn: [registration.id, ...resource.dependsOn],
      run: async () => {
        const previous = recorded.get(resource.id.toLowerCase());
        const data = previous?.data as RecordData | undefined;
        if (data?.status === 'ready') {
          ctx.log.debug('azure: already created', { kind: resource.kind, name: resource.name });
          return data.output ?? {};
        }
        const record = (extra: Partial<RecordData>) =>
          ctx.journal.record({
            kind: resource.kind,
            id: resource.id,
            name: resource.name,
            dependsOn: resource.dependsOn.map((key) => idOfKey.get(key)!),
            data: { ...data, uid: request.uid, ...extra },
          });
        ctx.progress?.(`creating ${describe(resource)}`);
        try {
          const output = await this.createOne(resource, config, clients, ctx, data, record, sshPublicKey);
          ctx.log.debug('azure: created', { kind: resource.kind, name: resource.name });
          return output;
        } catch (err) {
          throw toUserError(err, `creating ${describe(resource)}`);
        }
      },
    }));

    let results: Map<string, unknown>;
    try {
      results = await runTaskGraph([registration, ...tasks], { signal: ctx.signal });
    } catch (err) {
      const user = toUserError(err, 'creating the cluster');
      // Without credentials there is nothing to roll back with; say what to set instead.
      if (user instanceof NoAzureCredentialsError) throw user;
      const anything = (await ctx.journal.list()).some((r) => isAzureKind(r.kind));
      throw new CreateFailedError(`Creating the Azure infrastructure failed: ${user.message}`, {
        canRollBack: anything,
        code: (user as { code?: string }).code,
        causeHint: user.hint,
        cause: err,
      });
    }

    const endpoint = (results.get('public-ip:lb') as RecordData['output'])?.ipAddress;
    if (!endpoint)
      throw new CreateFailedError('Azure did not assign an address to the load balancer.', { canRollBack: true });
    const scaleSets = Object.fromEntries(plan.filter((p) => p.kind === 'azure:vmss').map((p) => [p.nodeGroup, p.name]));
    const lb = plan.find((p) => p.kind === 'azure:load-balancer')!;
    const nsg = plan.find((p) => p.kind === 'azure:network-security-group')!;
    return {
      clusterEndpoint: endpoint,
      inClusterEndpoint: endpoint,
      apiServerCertSANs: [endpoint],
      ipCidrNode: NODE_SUBNET_CIDR,
      providerState: {
        subscription: config.subscription,
        resourceGroup: config.resourceGroup,
        location: config.location,
        loadBalancerName: lb.name,
        networkSecurityGroupName: nsg.name,
        userAssignedIdentity: config.userAssignedIdentity,
        scaleSets,
      },
    };
  }

  /** Creates one planned resource; `record` writes its journal entry. Returns the outputs later tasks need. */
  private async createOne(
    resource: PlannedResource,
    config: AzureConfig,
    clients: AzureClients,
    ctx: ProviderContext,
    previous: RecordData | undefined,
    record: (extra: Partial<RecordData>) => Promise<void>,
    newSshPublicKey: () => Promise<string>,
  ): Promise<RecordData['output']> {
    const rg = config.resourceGroup;
    const lro = lroOptions(this.options, ctx.signal);
    // Classic SDK clients: begin* resolves once Azure accepted the request; record, then wait for completion.
    const putAndWait = async <T>(begin: () => Promise<{ pollUntilDone(): Promise<T> }>): Promise<T> => {
      const poller = await begin();
      await record({ status: 'accepted' });
      return poller.pollUntilDone();
    };
    switch (resource.kind) {
      case 'azure:resource-group': {
        // The resource group usually exists (made by `iam create azure`); only one we made is ours to delete.
        if (!previous && (await clients.resources.resourceGroups.checkExistence(rg)).body) return {};
        await clients.resources.resourceGroups.createOrUpdate(rg, resource.body);
        await record({ status: 'ready' });
        return {};
      }
      case 'azure:public-ip': {
        const ip = await putAndWait(() =>
          clients.network.publicIPAddresses.beginCreateOrUpdate(rg, resource.name, resource.body, lro),
        );
        const output = { ipAddress: ip.ipAddress };
        await record({ status: 'ready', output });
        return output;
      }
      case 'azure:nat-gateway':
        await putAndWait(() => clients.network.natGateways.beginCreateOrUpdate(rg, resource.name, resource.body, lro));
        break;
      case 'azure:network-security-group':
        await putAndWait(() =>
          clients.network.networkSecurityGroups.beginCreateOrUpdate(rg, resource.name, resource.body, lro),
        );
        break;
      case 'azure:vnet':
        await putAndWait(() =>
          clients.network.virtualNetworks.beginCreateOrUpdate(rg, resource.name, resource.body, lro),
        );
        break;
      case 'azure:load-balancer':
        await putAndWait(() =>
          clients.network.loadBalancers.beginCreateOrUpdate(rg, resource.name, resource.body, lro),
        );
        break;
      case 'azure:vmss': {
        // Reuse the key of an accepted scale set: Azure refuses to change the SSH keys of an existing one.
        const sshPublicKey = previous?.sshPublicKey ?? (await newSshPublicKey());
        const poller = clients.compute.virtualMachineScaleSets.createOrUpdate(
          rg,
          resource.name,
          resource.body(sshPublicKey),
          lro,
        );
        await poller.submitted();
        const extra = { nodeGroup: resource.nodeGroup, role: resource.role, sshPublicKey };
        await record({ status: 'accepted', ...extra });
        await poller;
        await record({ status: 'ready', ...extra });
        return {};
      }
      default:
        throw new Error(`no create step for ${(resource as PlannedResource).kind}`);
    }
    await record({ status: 'ready' });
    return {};
  }
}

function describe(resource: PlannedResource): string {
  return `${resource.kind.replace('azure:', '')} ${resource.name}`;
}
