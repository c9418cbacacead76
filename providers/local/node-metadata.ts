/**
 * Node side of the local provider: the NodeMetadata a bootstrapper asks (docs/design.md#providers), as an HTTP client of the
 * cluster's metadata server. A node is identified by its source address, so every request leaves from NODE_IP.
 * Also the AK registry client (local-vtpm: `GET /v1/ak/<instance>`: AK, role and address) for the join service and the CLI.
 */
import type { AkRegistry, RegisteredInstance } from '../../lib/attestation/types.js';
import { UserError } from '../../lib/errors.js';
import type { InstanceMetadata, NodeMetadata } from '../contract.js';
import { HttpStatusError, requestJson } from './http-json.js';

export interface LocalNodeMetadataOptions {
  /** Base URL of the metadata server, e.g. http://10.213.5.1:8080. Default: env METADATA_URL. */
  metadataUrl?: string;
  /** This node's address, used as source address. Default: env NODE_IP. */
  nodeIp?: string;
}

function required(value: string | undefined, what: string): string {
  if (!value) {
    throw new UserError(`The local provider's node metadata needs ${what}.`, {
      hint: 'The node launcher sets METADATA_URL and NODE_IP for the node program; set them when running it by hand.',
    });
  }
  return value;
}

export class LocalNodeMetadata implements NodeMetadata {
  private readonly base: string;
  private readonly nodeIp: string;

  constructor(options: LocalNodeMetadataOptions = {}) {
    this.base = required(options.metadataUrl ?? process.env.METADATA_URL, 'METADATA_URL').replace(/\/$/, '');
    this.nodeIp = required(options.nodeIp ?? process.env.NODE_IP, 'NODE_IP');
  }

  private get<T>(path: string): Promise<T> {
    return requestJson<T>(`${this.base}${path}`, { localAddress: this.nodeIp });
  }

  self(): Promise<InstanceMetadata> {
    return this.get('/v1/self');
  }

  peers(): Promise<InstanceMetadata[]> {
    return this.get('/v1/peers');
  }

  async loadBalancerEndpoint(): Promise<string> {
    return (await this.get<{ endpoint: string }>('/v1/load-balancer')).endpoint;
  }

  async initSecretHash(): Promise<string> {
    return (await this.get<{ initSecretHash: string }>('/v1/init-secret-hash')).initSecretHash;
  }

  async joinServiceKey(): Promise<string> {
    return (await this.get<{ joinServiceKey: string }>('/v1/join-service-key')).joinServiceKey;
  }
}

/** The AK registry of a local cluster: what the provider registered for an instance (one request), or undefined. */
export function localAkRegistry(metadataUrl: string, options: { localAddress?: string } = {}): AkRegistry {
  const base = metadataUrl.replace(/\/$/, '');
  return {
    async lookup(instance: string): Promise<RegisteredInstance | undefined> {
      let node: { akPublic: string; role: 'control-plane' | 'worker'; address?: string };
      try {
        node = await requestJson(`${base}/v1/ak/${encodeURIComponent(instance)}`, options);
      } catch (err) {
        if (err instanceof HttpStatusError && err.status === 404) return undefined;
        throw err;
      }
      return {
        akPublic: new Uint8Array(Buffer.from(node.akPublic, 'base64')),
        role: node.role,
        ...(node.address === undefined ? {} : { addresses: [node.address] }),
      };
    },
  };
}
