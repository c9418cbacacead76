/**
 * Terminate on GCP: deletes exactly the resources the journal recorded (and, with byTag, anything else whose
 * name carries the cluster's prefix or whose labels carry its uid — not every GCP kind has labels), in
 * reverse dependency order and concurrently where independent. A resource already gone counts as deleted;
 * one GCP still reports in use (instance groups linger briefly after their manager) is retried. Each
 * resource leaves the journal when it is gone, so an interrupted terminate continues where it stopped.
 */
import { UserError } from '../../lib/errors.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import { GcpCompute, journalKind, KINDS, parseRefId, refId, type GcpKind, type GcpResource, type ResourceRef } from './clients.js';
import { isInUse, isNotFound, toUserError } from './errors.js';
import { DEFAULT_IN_USE_RETRIES, DEFAULT_POLL_INTERVAL_MS, type GcpProviderOptions } from './options.js';
import { labelValue, LABEL_UID, namePrefix } from './plan.js';
import { sleep } from './retry.js';
import { runTaskGraph, TaskGraphError } from './task-graph.js';

/** Which kinds a kind refers to: it must be deleted before them (used for resources found by tag). */
const KIND_DEPENDENCIES: Record<GcpKind, GcpKind[]> = {
  forwardingRule: ['backendService', 'address'],
  backendService: ['healthCheck', 'instanceGroupManager'],
  instanceGroupManager: ['instanceTemplate'],
  instanceTemplate: ['subnetwork', 'network', 'address'],
  subnetwork: ['network'],
  router: ['network'],
  firewall: ['network'],
  network: [],
  address: [],
  healthCheck: [],
};

const INFRASTRUCTURE_KINDS = new Set((Object.keys(KINDS) as GcpKind[]).map(journalKind));

interface Doomed {
  ref: ResourceRef;
  dependsOn: Set<string>;
}

export async function terminateRecorded(
  api: GcpCompute,
  records: RecordedResource[],
  ctx: ProviderContext,
  options: { byTag: boolean; providerOptions: GcpProviderOptions },
): Promise<void> {
  // The journal may also hold IAM records (iam create): those are iam destroy's.
  const infra = records.filter((r) => INFRASTRUCTURE_KINDS.has(r.kind) && parseRefId(r.id));
  const doomed = new Map<string, Doomed>(infra.map((r) => [r.id, { ref: parseRefId(r.id)!, dependsOn: new Set(r.dependsOn ?? []) }]));
  if (options.byTag) {
    for (const ref of await discover(api, infra, options.providerOptions, ctx)) {
      const id = refId(ref);
      if (!doomed.has(id)) doomed.set(id, { ref, dependsOn: new Set() });
    }
  }
  for (const item of doomed.values()) {
    for (const [id, other] of doomed) if (KIND_DEPENDENCIES[item.ref.kind].includes(other.ref.kind)) item.dependsOn.add(id);
  }
  const entries = [...doomed];
  const tasks = entries.map(([id, item]) => ({
    id,
    // A resource goes after everything that refers to it.
    deps: entries.filter(([, other]) => other.dependsOn.has(id)).map(([otherId]) => otherId),
    run: () => deleteOne(api, id, item.ref, ctx, options.providerOptions),
  }));
  try {
    await runTaskGraph(tasks, { stopOnError: false, signal: ctx.signal });
  } catch (err) {
    if (!(err instanceof TaskGraphError)) throw err;
    const messages = err.failures.map((f) => (f.cause as Error)?.message ?? String(f.cause));
    throw new UserError(`Terminating the GCP infrastructure failed for ${err.failures.length} resource(s): ${messages.join('; ')}`, {
      hint: 'Run `constellation terminate` again: the workspace still lists what is left.',
      cause: err,
    });
  }
}

async function deleteOne(api: GcpCompute, id: string, ref: ResourceRef, ctx: ProviderContext, options: GcpProviderOptions): Promise<void> {
  const what = `${KINDS[ref.kind].label} ${ref.name}`;
  const call = { signal: ctx.signal };
  const retries = options.inUseRetries ?? DEFAULT_IN_USE_RETRIES;
  ctx.progress?.(`deleting ${what}`);
  for (let attempt = 0; ; attempt++) {
    try {
      const op = await api.delete(ref, call);
      if (op) await api.waitForOperation(op, ref.project, call);
      break;
    } catch (err) {
      if (isNotFound(err)) break;
      if (isInUse(err) && attempt < retries) {
        ctx.log.debug('gcp: resource still in use, retrying delete', { id });
        await sleep(options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS, ctx.signal);
        continue;
      }
      throw toUserError(`Deleting ${what}`, err);
    }
  }
  await ctx.journal.remove(id);
  ctx.log.debug('gcp: deleted', { id });
}

/** Resources of the cluster the journal does not know: by name prefix or uid label. */
async function discover(api: GcpCompute, records: RecordedResource[], options: GcpProviderOptions, ctx: ProviderContext): Promise<ResourceRef[]> {
  const refs = records.map((r) => parseRefId(r.id)!);
  const uid = options.uid ?? records.map((r) => r.data?.uid).find((u): u is string => typeof u === 'string');
  const project = options.project ?? refs[0]?.project;
  const regions = new Set(refs.filter((r) => KINDS[r.kind].scope === 'region').map((r) => r.location!));
  const zones = new Set(refs.filter((r) => KINDS[r.kind].scope === 'zone').map((r) => r.location!));
  if (options.region) regions.add(options.region);
  if (options.zone) zones.add(options.zone);
  for (const r of records) {
    if (typeof r.data?.region === 'string') regions.add(r.data.region);
    for (const z of Array.isArray(r.data?.zones) ? r.data.zones : []) if (typeof z === 'string') zones.add(z);
  }
  if (!uid || !project) {
    throw new UserError('Cannot search for the cluster\'s resources by tag: the workspace records neither its uid nor its project.', {
      hint: 'Delete the resources labelled constellation-uid in the Google Cloud console.',
    });
  }
  const prefix = `${namePrefix(uid)}-`;
  const label = labelValue(uid);
  const matches = (r: GcpResource) => {
    const labels = (r.labels ?? (r.properties as { labels?: unknown } | undefined)?.labels) as Record<string, string> | undefined;
    return (r.name ?? '').startsWith(prefix) || labels?.[LABEL_UID] === label;
  };
  const found: ResourceRef[] = [];
  for (const kind of Object.keys(KINDS) as GcpKind[]) {
    const scope = KINDS[kind].scope;
    const locations = scope === 'global' ? [undefined] : [...(scope === 'region' ? regions : zones)];
    for (const location of locations) {
      for (const r of await api.list(kind, project, location, { signal: ctx.signal })) {
        if (matches(r)) found.push({ kind, project, location, name: r.name ?? '' });
      }
    }
  }
  return found;
}
