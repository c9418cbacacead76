/**
 * Single instances of a GCP node group (managed instance group, MIG), as upgrades and scale-in need them: one more
 * instance in service, exactly one chosen instance out of the load balancer and then gone, and the groups' instance
 * template brought to what new instances must be (the upgrade's image; no init-secret hash once initialized).
 *
 *   addInstance     current template ─ createInstances (a name we choose; raises targetSize by one)
 *                   ─ wait until the group reports it RUNNING with no action pending
 *   drainInstance   abandonInstances: out of the group, so out of every backend service that serves the group; the
 *                   VM keeps running (targetSize drops by one, so the group makes no replacement)
 *   removeInstance  a member: deleteInstances of exactly that instance (lowers targetSize: no replacement, no
 *                   other victim); an abandoned one: instances.delete; then wait until it is gone
 *   markInitialized every group's template without the init-secret hash, and the hash out of every instance's
 *                   metadata (setMetadata with the metadata's fingerprint)
 *
 * Instance templates cannot change: a different template is a new one, named after its group and a digest of its
 * properties (a re-run finds it), recorded in the journal (terminate deletes it after the group) and set as the
 * group's template (setInstanceTemplate: only instances made afterwards use it). A group's `resize` is used to grow
 * only: shrinking it lets GCP pick the victims (docs/workflows/gcp.md).
 * References: https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers (createInstances,
 * deleteInstances, abandonInstances, setInstanceTemplate, listManagedInstances), upstream Constellation's node
 * operator (operators/constellation-node-operator/internal/cloud/gcp/client/nodeimage.go: CreateNode, DeleteNode).
 */
import { createHash, randomInt } from 'node:crypto';
import type { InstanceGroupManagersClient, InstancesClient } from '@google-cloud/compute';
import { UserError } from '../../lib/errors.js';
import { pollUntil } from '../../lib/poll.js';
import type { ProviderContext, RecordedResource } from '../contract.js';
import { journalKind, parseRefId, refId, type GcpCompute, type Operation } from './clients.js';
import { gcpErrorInfo, isAlreadyExists, isNotFound, toUserError } from './errors.js';
import { instanceId, metadataItems, type GceInstance, type InstanceRef } from './gce-instance.js';
import { DEFAULT_POLL_INTERVAL_MS, type GcpProviderOptions } from './options.js';
import { META_IMAGE, META_INIT_SECRET_HASH } from './plan.js';
import { sleep } from './retry.js';

/** A node group's managed instance group, as the journal recorded it. */
export interface GroupRecord {
  nodeGroup: string;
  project: string;
  zone: string;
  name: string;
  uid: string;
  record: RecordedResource;
}

const INSTANCE_TIMEOUT_MS = 15 * 60_000;

type TemplateProperties = Record<string, unknown> & {
  disks?: { boot?: boolean; initializeParams?: { sourceImage?: string } }[];
  metadata?: { items?: { key?: string; value?: string }[] };
};

export class GcpScaling {
  constructor(
    private readonly api: GcpCompute,
    private readonly options: GcpProviderOptions,
    private readonly ctx: ProviderContext,
  ) {}

  private get call() {
    return { signal: this.ctx.signal };
  }

  private igms(): InstanceGroupManagersClient {
    return this.api.client<InstanceGroupManagersClient>('InstanceGroupManagersClient');
  }

  private request(group: GroupRecord) {
    return { project: group.project, zone: group.zone, instanceGroupManager: group.name };
  }

  private async wait(op: unknown, project: string, action: string): Promise<void> {
    try {
      await this.api.waitForOperation(op as Operation, project, this.call);
    } catch (err) {
      throw toUserError(action, err);
    }
  }

  /**
   * Makes the group's template what new instances must be: `image` as the boot image (and the image metadata item),
   * without the init-secret hash when `initialized`. Unchanged properties keep the template.
   */
  async ensureTemplate(group: GroupRecord, change: { image?: string; initialized?: boolean }): Promise<void> {
    const [igm] = await this.api.call(
      `Reading node group ${group.nodeGroup}`,
      () => this.igms().get(this.request(group)),
      this.call,
    );
    const currentRef = parseRefId(igm.instanceTemplate ?? '');
    if (!currentRef) throw new UserError(`Node group ${group.nodeGroup} has no instance template.`);
    const current = await this.api.get(currentRef, this.call);
    if (!current)
      throw new UserError(`The instance template ${currentRef.name} of node group ${group.nodeGroup} does not exist.`);
    const properties = structuredClone((current.properties ?? {}) as TemplateProperties);
    const before = JSON.stringify(properties);
    if (change.image) {
      const boot = properties.disks?.find((d) => d.boot);
      if (boot?.initializeParams) boot.initializeParams.sourceImage = change.image;
      setItem(properties, META_IMAGE, change.image);
    }
    if (change.initialized) setItem(properties, META_INIT_SECRET_HASH, undefined);
    if (JSON.stringify(properties) === before) return;

    const digest = createHash('sha256').update(JSON.stringify(properties)).digest('hex').slice(0, 8);
    const ref = { ...currentRef, name: `${group.name.slice(0, 54).replace(/-+$/, '')}-${digest}` };
    const id = refId(ref);
    const old = (await this.ctx.journal.list()).find((r) => r.id === refId(currentRef));
    this.ctx.progress?.(`making instance template ${ref.name} for node group ${group.nodeGroup}`);
    try {
      const op = await this.api.insert(ref, { description: current.description, properties }, this.call);
      await this.ctx.journal.record({
        kind: journalKind('instanceTemplate'),
        id,
        name: ref.name,
        dependsOn: old?.dependsOn ?? [],
        data: { ...old?.data, state: 'creating' },
      });
      await this.wait(op, ref.project, `Creating instance template ${ref.name}`);
    } catch (err) {
      if (!isAlreadyExists(err)) throw toUserError(`Creating instance template ${ref.name}`, err);
    }
    await this.ctx.journal.record({
      kind: journalKind('instanceTemplate'),
      id,
      name: ref.name,
      dependsOn: old?.dependsOn ?? [],
      data: { ...old?.data, state: 'created' },
    });
    // The group now refers to the new template too: terminate deletes the group first.
    await this.ctx.journal.record({
      ...group.record,
      dependsOn: [...new Set([...(group.record.dependsOn ?? []), id])],
    });
    const [lro] = await this.api.call(
      `Setting the instance template of node group ${group.nodeGroup}`,
      () =>
        this.igms().setInstanceTemplate({
          ...this.request(group),
          instanceGroupManagersSetInstanceTemplateRequestResource: { instanceTemplate: id },
        }),
      this.call,
    );
    await this.wait(
      lro.latestResponse,
      group.project,
      `Setting the instance template of node group ${group.nodeGroup}`,
    );
  }

  /** One more instance in the group (see the module header); resolves once GCP reports it RUNNING. */
  async addInstance(group: GroupRecord): Promise<InstanceRef> {
    const [igm] = await this.api.call(
      `Reading node group ${group.nodeGroup}`,
      () => this.igms().get(this.request(group)),
      this.call,
    );
    // As upstream's node operator: the group's base name and four random characters.
    const name = `${(igm.baseInstanceName ?? group.name).slice(0, 58)}-${randomSuffix()}`;
    this.ctx.progress?.(`adding ${name} to node group ${group.nodeGroup}`);
    const [lro] = await this.api.call(
      `Adding an instance to node group ${group.nodeGroup}`,
      () =>
        this.igms().createInstances({
          ...this.request(group),
          instanceGroupManagersCreateInstancesRequestResource: { instances: [{ name }] },
        }),
      this.call,
    );
    await this.wait(lro.latestResponse, group.project, `Adding ${name} to node group ${group.nodeGroup}`);
    await this.waitForGroup(group, (managed) => managed.some((m) => m.name === name && m.ready), `${name} to run`);
    return { project: group.project, zone: group.zone, name };
  }

  /** Whether the instance is a member of the group right now. */
  private async isMember(group: GroupRecord, ref: InstanceRef): Promise<boolean> {
    return (await this.managed(group)).some((m) => m.name === ref.name);
  }

  /** Out of the group (and so out of the load balancer); the VM keeps running until removeInstance. */
  async drainInstance(group: GroupRecord, ref: InstanceRef): Promise<void> {
    if (!(await this.isMember(group, ref))) return;
    this.ctx.progress?.(`taking ${ref.name} out of the load balancer`);
    const [lro] = await this.api.call(
      `Taking ${ref.name} out of node group ${group.nodeGroup}`,
      () =>
        this.igms().abandonInstances({
          ...this.request(group),
          instanceGroupManagersAbandonInstancesRequestResource: { instances: [instanceId(ref)] },
        }),
      this.call,
    );
    await this.wait(lro.latestResponse, group.project, `Taking ${ref.name} out of node group ${group.nodeGroup}`);
  }

  /** Deletes exactly this instance and lowers its group's target size (see the module header). */
  async removeInstance(group: GroupRecord | undefined, ref: InstanceRef): Promise<void> {
    this.ctx.progress?.(`deleting ${ref.name}`);
    if (group && (await this.isMember(group, ref))) {
      const [lro] = await this.api.call(
        `Deleting ${ref.name} from node group ${group.nodeGroup}`,
        () =>
          this.igms().deleteInstances({
            ...this.request(group),
            instanceGroupManagersDeleteInstancesRequestResource: {
              instances: [instanceId(ref)],
              skipInstancesOnValidationError: true,
            },
          }),
        this.call,
      );
      await this.wait(lro.latestResponse, group.project, `Deleting ${ref.name}`);
    } else {
      const instances = this.api.client<InstancesClient>('InstancesClient');
      let lro: { latestResponse?: unknown };
      try {
        [lro] = await this.api.rawCall(
          () => instances.delete({ project: ref.project, zone: ref.zone, instance: ref.name }),
          this.call,
        );
      } catch (err) {
        if (isNotFound(err)) return;
        throw toUserError(`Deleting ${ref.name}`, err);
      }
      await this.wait(lro.latestResponse, ref.project, `Deleting ${ref.name}`);
    }
    await this.until(async () => !(await this.instance(ref)), `${ref.name} to be deleted`);
  }

  /** The init-secret hash out of every template and instance of the cluster (see the module header). */
  async markInitialized(groups: GroupRecord[], instances: GceInstance[]): Promise<void> {
    for (const group of groups) await this.ensureTemplate(group, { initialized: true });
    for (const instance of instances) {
      if (metadataItems(instance)[META_INIT_SECRET_HASH] === undefined) continue;
      const ref = {
        project: groups[0]!.project,
        zone: (instance.zone ?? '').split('/').pop() ?? '',
        name: instance.name ?? '',
      };
      await this.removeMetadataItem(ref, META_INIT_SECRET_HASH);
    }
  }

  /** setMetadata without `key`; a fingerprint that changed meanwhile (412) means: read again and retry. */
  private async removeMetadataItem(ref: InstanceRef, key: string): Promise<void> {
    const instances = this.api.client<InstancesClient>('InstancesClient');
    for (let attempt = 1; ; attempt++) {
      const current = await this.instance(ref);
      if (!current) return;
      const items = (current.metadata?.items ?? []).filter((i) => i.key !== key);
      if (items.length === (current.metadata?.items ?? []).length) return;
      try {
        const [lro] = await this.api.rawCall(
          () =>
            instances.setMetadata({
              project: ref.project,
              zone: ref.zone,
              instance: ref.name,
              metadataResource: { items, fingerprint: current.metadata?.fingerprint },
            }),
          this.call,
        );
        await this.wait(lro.latestResponse, ref.project, `Updating the metadata of ${ref.name}`);
        return;
      } catch (err) {
        if (gcpErrorInfo(err).status !== 412 || attempt >= 5)
          throw toUserError(`Updating the metadata of ${ref.name}`, err);
      }
    }
  }

  async instance(ref: InstanceRef): Promise<GceInstance | undefined> {
    const instances = this.api.client<InstancesClient>('InstancesClient');
    try {
      const [instance] = await this.api.rawCall(
        () => instances.get({ project: ref.project, zone: ref.zone, instance: ref.name }),
        this.call,
      );
      return instance;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw toUserError(`Reading instance ${ref.name}`, err);
    }
  }

  /** The group's instances as listManagedInstances reports them: ready = RUNNING with no action pending. */
  async managed(group: GroupRecord): Promise<{ name: string; ready: boolean }[]> {
    const [managed] = await this.api.call(
      `Listing the instances of node group ${group.nodeGroup}`,
      () => this.igms().listManagedInstances(this.request(group)),
      this.call,
    );
    return managed.map((m) => ({
      name: (m.instance ?? '').split('/').pop() ?? '',
      ready: m.instanceStatus === 'RUNNING' && (m.currentAction ?? 'NONE') === 'NONE',
    }));
  }

  /** Waits until the group's instances satisfy `done` ("resize is DONE when the actions are scheduled"). */
  async waitForGroup(
    group: GroupRecord,
    done: (managed: { name: string; ready: boolean }[]) => boolean,
    what: string,
  ): Promise<void> {
    await this.until(async () => done(await this.managed(group)), what);
  }

  private async until(check: () => Promise<boolean>, what: string): Promise<void> {
    await pollUntil(async () => ((await check()) ? true : undefined), {
      timeoutMs: this.options.instanceTimeoutMs ?? INSTANCE_TIMEOUT_MS,
      intervalMs: this.options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      // GCP's own sleep: an abort rejects with the signal's reason, as every GCP call does (./retry.ts).
      sleep,
      signal: this.ctx.signal,
      onTimeout: () => {
        throw new UserError(`Timed out waiting for ${what}.`, {
          hint: 'Check the managed instance groups in the Google Cloud console; `constellation status` shows the nodes.',
        });
      },
    });
  }
}

/** Sets (or, with undefined, removes) one metadata item of instance properties. */
function setItem(properties: TemplateProperties, key: string, value: string | undefined): void {
  const items = (properties.metadata ??= {}).items ?? [];
  const existing = items.find((i) => i.key === key);
  if (value === undefined) properties.metadata.items = items.filter((i) => i.key !== key);
  else if (existing) existing.value = value;
  else properties.metadata.items = [...items, { key, value }];
}

function randomSuffix(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length: 4 }, () => alphabet[randomInt(alphabet.length)]).join('');
}
