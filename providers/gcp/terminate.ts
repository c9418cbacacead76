/**
 * Terminate on GCP: deletes exactly the resources the journal recorded (and, with byTag, anything else whose
 * name carries the cluster's prefix or whose labels carry its uid — not every GCP kind has labels), in
 * reverse dependency order and concurrently where independent, through the shared deleter
 * (../common/delete-order.ts). A resource already gone counts as deleted; one GCP still reports in use
 * (instance groups linger briefly after their manager) is retried. A failed delete skips only what waits for
 * it: everything else is still deleted, and every failure is reported. Each resource leaves the journal when it
 * is gone, so an interrupted terminate continues where it stopped.
 */
import { UserError } from '../../lib/errors.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import { deleteInReverseDependencyOrder } from '../common/delete-order.js';
import { TaskGraphError } from '../common/task-graph.js';
import {
  GcpCompute,
  journalKind,
  KINDS,
  parseRefId,
  refId,
  type GcpKind,
  type GcpResource,
  type ResourceRef,
} from './clients.js';
import { gcpErrorInfo, isInUse, isNotFound, toUserError } from './errors.js';
import { DEFAULT_IN_USE_RETRIES, DEFAULT_POLL_INTERVAL_MS, type GcpProviderOptions } from './options.js';
import { labelValue, LABEL_UID, namePrefix } from './plan.js';

/** Which kinds a kind refers to: it must be deleted before them (also orders resources found by tag). */
const KIND_DEPENDENCIES: Record<GcpKind, GcpKind[]> = {
  globalForwardingRule: ['targetTcpProxy', 'globalAddress'],
  targetTcpProxy: ['backendService'],
  backendService: ['healthCheck', 'instanceGroupManager'],
  forwardingRule: ['regionBackendService', 'address'],
  regionBackendService: ['regionHealthCheck', 'instanceGroupManager'],
  instanceGroupManager: ['instanceTemplate'],
  instanceTemplate: ['subnetwork', 'network', 'address', 'globalAddress'],
  subnetwork: ['network'],
  router: ['network'],
  firewall: ['network'],
  network: [],
  address: [],
  globalAddress: [],
  healthCheck: [],
  regionHealthCheck: [],
};

const INFRASTRUCTURE_KINDS = new Set((Object.keys(KINDS) as GcpKind[]).map(journalKind));

export async function terminateRecorded(
  api: GcpCompute,
  records: RecordedResource[],
  ctx: ProviderContext,
  options: { byTag: boolean; providerOptions: GcpProviderOptions },
): Promise<void> {
  // The journal may also hold IAM records (iam create): those are iam destroy's.
  const doomed = records.filter((r) => INFRASTRUCTURE_KINDS.has(r.kind) && parseRefId(r.id));
  if (options.byTag) {
    const known = new Set(doomed.map((r) => r.id));
    for (const ref of await discover(api, doomed, options.providerOptions, ctx)) {
      const id = refId(ref);
      if (!known.has(id)) doomed.push({ kind: journalKind(ref.kind), id, name: ref.name });
      known.add(id);
    }
  }
  const refOf = (r: RecordedResource) => parseRefId(r.id)!;
  const label = (r: RecordedResource) => `${KINDS[refOf(r).kind].label} ${refOf(r).name}`;
  const call = { signal: ctx.signal };
  try {
    await deleteInReverseDependencyOrder(doomed, {
      deleteOne: async (r) => {
        try {
          const op = await api.delete(refOf(r), call);
          if (op) await api.waitForOperation(op, refOf(r).project, call);
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        ctx.log.debug('gcp: deleted', { id: r.id });
      },
      journal: ctx.journal,
      // A resource goes before the kinds it refers to.
      deleteBefore: (first, then) => KIND_DEPENDENCIES[refOf(first).kind].includes(refOf(then).kind),
      inUseRetry: {
        inUse: (err) => (isInUse(err) ? (gcpErrorInfo(err).reason ?? 'in use') : undefined),
        attempts: (options.providerOptions.inUseRetries ?? DEFAULT_IN_USE_RETRIES) + 1,
        delayMs: options.providerOptions.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      },
      onFailure: 'skip-dependents',
      describe: label,
      progress: ctx.progress,
      log: ctx.log,
      signal: ctx.signal,
    });
  } catch (err) {
    if (!(err instanceof TaskGraphError)) throw err;
    if (err.task === '(aborted)') throw err.cause;
    const byId = new Map(doomed.map((r) => [r.id, r]));
    const messages = err.failures.map((f) => toUserError(`Deleting ${label(byId.get(f.task)!)}`, f.error).message);
    throw new UserError(
      `Terminating the GCP infrastructure failed for ${messages.length} resource(s): ${messages.join('; ')}`,
      {
        hint: 'Run `constellation terminate` again: the workspace still lists what is left.',
        cause: err,
      },
    );
  }
}

/** Resources of the cluster the journal does not know: by name prefix or uid label. */
async function discover(
  api: GcpCompute,
  records: RecordedResource[],
  options: GcpProviderOptions,
  ctx: ProviderContext,
): Promise<ResourceRef[]> {
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
    throw new UserError(
      "Cannot search for the cluster's resources by tag: the workspace records neither its uid nor its project.",
      {
        hint: 'Delete the resources labelled constellation-uid in the Google Cloud console.',
      },
    );
  }
  const prefix = `${namePrefix(uid)}-`;
  const label = labelValue(uid);
  const matches = (r: GcpResource) => {
    const labels = (r.labels ?? (r.properties as { labels?: unknown } | undefined)?.labels) as
      Record<string, string> | undefined;
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
