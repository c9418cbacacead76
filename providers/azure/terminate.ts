/**
 * Terminate on Azure: deletes what the journal holds (and, with byTag, whatever else in the resource group carries
 * the cluster's uid tag) through the shared deleter of ./deletion.ts.
 */
import type { ProviderContext, RecordedResource, TerminateOptions } from '../contract.js';
import type { AzureClients } from './clients.js';
import type { RecordData } from './create.js';
import { deleteAll, isAzureKind } from './deletion.js';
import { isNotFound, toUserError } from './errors.js';
import type { AzureProviderOptions } from './options.js';
import { kindOfType, parseResourceId, TAG_UID } from './plan.js';
import { collect } from './scale-set-members.js';

export class AzureTerminate {
  constructor(
    private readonly options: AzureProviderOptions,
    /** The SDK clients for a subscription (the provider keeps one set per subscription). */
    private readonly clients: (subscription: string) => Promise<AzureClients>,
  ) {}

  async run(ctx: ProviderContext, options: TerminateOptions = {}): Promise<void> {
    const recorded = (await ctx.journal.list()).filter((r) => isAzureKind(r.kind));
    if (recorded.length === 0) return;
    const { subscription, resourceGroup } = parseResourceId(recorded[0].id);
    const clients = await this.clients(subscription);
    const resources = [...recorded];
    if (options.byTag) resources.push(...(await this.taggedExtras(clients, resourceGroup, recorded)));
    await deleteAll(resources, new Set(recorded.map((r) => r.id)), {
      clients,
      journal: ctx.journal,
      pollIntervalMs: this.options.pollIntervalMs,
      signal: ctx.signal,
      progress: ctx.progress,
    });
  }

  /** Resources in the cluster's resource group that carry its uid tag but are not in the journal. */
  private async taggedExtras(
    clients: AzureClients,
    resourceGroup: string,
    recorded: RecordedResource[],
  ): Promise<RecordedResource[]> {
    const uid = recorded.map((r) => (r.data as RecordData | undefined)?.uid).find(Boolean);
    if (!uid) return [];
    const known = new Set(recorded.map((r) => r.id.toLowerCase()));
    try {
      const tagged = await collect(
        clients.resources.resources.listByResourceGroup(resourceGroup, {
          filter: `tagName eq '${TAG_UID}' and tagValue eq '${uid}'`,
        }),
      );
      return tagged.flatMap((r) => {
        const kind = r.type ? kindOfType(r.type) : undefined;
        return r.id && kind && !known.has(r.id.toLowerCase()) ? [{ kind, id: r.id, name: r.name }] : [];
      });
    } catch (err) {
      if (isNotFound(err)) return [];
      throw toUserError(err, `listing the resources tagged ${TAG_UID}=${uid}`);
    }
  }
}
