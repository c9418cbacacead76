/**
 * Node side of the GCP provider (NodeMetadata): the instance's own name, zone, project, IP and the attributes
 * its template set (role, uid, load-balancer address, bcrypt hash of the init secret, join-service key) come from the GCE
 * metadata server; peers come from the Compute API (instances labelled with the cluster's uid, in every zone).
 * The metadata server is read with fetch: a few GETs with one header (google's gcp-metadata package is not a
 * direct dependency). Its address honours GCE_METADATA_HOST like Google's libraries do.
 */
import type { InstancesClient } from '@google-cloud/compute';
import type { CloudControllerValues, InstanceMetadata, NodeMetadata } from '../contract.js';
import { GcpCompute, lastSegment } from './clients.js';
import { toInstanceMetadata } from './gce-instance.js';
import { DEFAULT_RETRY, type GcpProviderOptions } from './options.js';
import {
  labelValue,
  LABEL_UID,
  namePrefix,
  META_INIT_SECRET_HASH,
  META_JOIN_SERVICE_KEY,
  META_LOAD_BALANCER,
  META_ROLE,
  META_UID,
} from './plan.js';
import { withRetry } from './retry.js';

class MetadataError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export class GcpNodeMetadata implements NodeMetadata {
  private readonly base: string;
  private api?: Promise<GcpCompute>;

  constructor(private readonly options: GcpProviderOptions = {}) {
    const host = process.env.GCE_METADATA_HOST;
    this.base = (options.metadataEndpoint ?? (host ? `http://${host}` : 'http://metadata.google.internal')).replace(
      /\/$/,
      '',
    );
  }

  async self(): Promise<InstanceMetadata> {
    const [name, zone, project, ip, role] = await Promise.all([
      this.get('instance/name'),
      this.get('instance/zone'),
      this.get('project/project-id'),
      this.get('instance/network-interfaces/0/ip'),
      this.attribute(META_ROLE),
    ]);
    return {
      name,
      providerId: `gce://${project}/${lastSegment(zone)}/${name}`,
      role: role === 'control-plane' ? 'control-plane' : 'worker',
      vpcIp: ip,
    };
  }

  async peers(): Promise<InstanceMetadata[]> {
    const [project, uid] = await Promise.all([this.get('project/project-id'), this.attribute(META_UID)]);
    const api = await (this.api ??= GcpCompute.open(this.options));
    const instances = api.client<InstancesClient>('InstancesClient');
    const value = labelValue(uid);
    const peers: InstanceMetadata[] = [];
    await api.call("Listing the cluster's instances", async () => {
      peers.length = 0;
      for await (const [, scoped] of instances.aggregatedListAsync(
        { project, filter: `labels.${LABEL_UID} = "${value}"` },
        { autoPaginate: false },
      )) {
        for (const instance of scoped.instances ?? []) {
          if (instance.labels?.[LABEL_UID] === value) peers.push(toInstanceMetadata(instance, project));
        }
      }
    });
    return peers.sort((a, b) => a.name.localeCompare(b.name));
  }

  async loadBalancerEndpoint(): Promise<string> {
    return this.attribute(META_LOAD_BALANCER);
  }

  /** '' once the cluster is initialized: markInitialized takes the attribute away (./scaling.ts), so no node added later serves Init. */
  async initSecretHash(): Promise<string> {
    try {
      return await this.get(`instance/attributes/${META_INIT_SECRET_HASH}`);
    } catch (err) {
      if (err instanceof MetadataError && err.status === 404) return '';
      throw err;
    }
  }

  async joinServiceKey(): Promise<string> {
    return this.attribute(META_JOIN_SERVICE_KEY);
  }

  /** The cluster's uid (the attribute its instance template set). */
  async clusterUid(): Promise<string> {
    return this.attribute(META_UID);
  }

  /** The cloud controller manager's values: the project and the network tag the provider gave the nodes (namePrefix of the uid). */
  async cloudControllerValues(): Promise<CloudControllerValues> {
    const [projectId, uid] = await Promise.all([this.get('project/project-id'), this.attribute(META_UID)]);
    return { cloud: 'gcp', projectId, nodeTag: namePrefix(uid) };
  }

  private async attribute(key: string): Promise<string> {
    const value = await this.get(`instance/attributes/${key}`);
    if (!value) throw new MetadataError(`The instance metadata attribute ${key} is empty.`);
    return value;
  }

  private async get(path: string): Promise<string> {
    const url = `${this.base}/computeMetadata/v1/${path}`;
    const retry = { ...DEFAULT_RETRY, ...this.options.retry };
    return withRetry(
      async () => {
        const response = await fetch(url, { headers: { 'Metadata-Flavor': 'Google' } });
        const text = await response.text();
        if (response.status === 404)
          throw new MetadataError(
            `The GCE metadata server has no ${path} (is the instance a Constellation node?).`,
            404,
          );
        if (!response.ok)
          throw new MetadataError(
            `The GCE metadata server answered ${response.status} for ${path}: ${text}`,
            response.status,
          );
        return text;
      },
      retry,
      { retryable: (err) => !(err instanceof MetadataError) || (err.status ?? 0) >= 500 },
    );
  }
}
