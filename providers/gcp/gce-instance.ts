/**
 * GCE instances as the contract sees them (Instance, InstanceMetadata): ids, role and node group from the
 * metadata the instance template set, addresses from the first network interface. Shared by the CLI side
 * (./instances.ts, ./scaling.ts) and the node side (peers, ./metadata.ts).
 */
import type { protos } from '@google-cloud/compute';
import { UserError } from '../../lib/errors.js';
import type { Instance, InstanceMetadata, InstanceState, NodeRole } from '../contract.js';
import { lastSegment } from './clients.js';
import { LABEL_NODE_GROUP, LABEL_ROLE, META_IMAGE, META_NODE_GROUP, META_ROLE } from './plan.js';

export type GceInstance = protos.google.cloud.compute.v1.IInstance;

export interface InstanceRef {
  project: string;
  zone: string;
  name: string;
}

export function instanceId(ref: InstanceRef): string {
  return `projects/${ref.project}/zones/${ref.zone}/instances/${ref.name}`;
}

/** Parses an instance id or self link. */
export function parseInstanceId(id: string): InstanceRef {
  const m = /projects\/([^/]+)\/zones\/([^/]+)\/instances\/([^/?]+)/.exec(id);
  if (!m) {
    throw new UserError(`"${id}" is not a GCP instance id.`, {
      hint: 'Use the id `constellation status` lists: projects/PROJECT/zones/ZONE/instances/NAME.',
    });
  }
  return { project: m[1]!, zone: m[2]!, name: m[3]! };
}

export function metadataItems(instance: GceInstance): Record<string, string> {
  const items: Record<string, string> = {};
  for (const item of instance.metadata?.items ?? []) if (item.key) items[item.key] = item.value ?? '';
  return items;
}

const STATES: Record<string, InstanceState> = {
  PROVISIONING: 'pending',
  STAGING: 'pending',
  RUNNING: 'running',
  REPAIRING: 'pending',
  STOPPING: 'stopped',
  STOPPED: 'stopped',
  SUSPENDING: 'stopped',
  SUSPENDED: 'stopped',
  TERMINATED: 'stopped',
};

function roleOf(instance: GceInstance): NodeRole {
  const role = metadataItems(instance)[META_ROLE] ?? instance.labels?.[LABEL_ROLE];
  return role === 'control-plane' ? 'control-plane' : 'worker';
}

export function toInstance(instance: GceInstance, project: string): Instance {
  const nic = instance.networkInterfaces?.[0];
  const publicIp = nic?.accessConfigs?.[0]?.natIP ?? undefined;
  return {
    id: instanceId({ project, zone: lastSegment(instance.zone), name: instance.name ?? '' }),
    name: instance.name ?? '',
    role: roleOf(instance),
    nodeGroup: metadataItems(instance)[META_NODE_GROUP] ?? instance.labels?.[LABEL_NODE_GROUP] ?? '',
    privateIp: nic?.networkIP ?? '',
    ...(publicIp ? { publicIp } : {}),
    state: STATES[instance.status ?? ''] ?? 'unknown',
    ...(metadataItems(instance)[META_IMAGE] ? { image: metadataItems(instance)[META_IMAGE] } : {}),
    ...(instance.creationTimestamp ? { createdAt: new Date(instance.creationTimestamp).toISOString() } : {}),
  };
}

/** Kubernetes' GCE provider id: gce://PROJECT/ZONE/NAME. */
export function toInstanceMetadata(instance: GceInstance, project: string): InstanceMetadata {
  return {
    name: instance.name ?? '',
    providerId: `gce://${project}/${lastSegment(instance.zone)}/${instance.name ?? ''}`,
    role: roleOf(instance),
    vpcIp: instance.networkInterfaces?.[0]?.networkIP ?? '',
  };
}
