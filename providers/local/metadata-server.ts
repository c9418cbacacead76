/**
 * The local cluster's metadata server (HTTP JSON, on <prefix>.1:8080): what a cloud's instance metadata service
 * and identity API are for cloud nodes. It tells a node who it is (by the connection's source address: every node
 * has its own address, in its own network namespace, which no other process can send from), its peers, the load balancer, the init-secret hash
 * (empty once the cluster is initialized: no node added later serves Init), the join-service key, and the registered attestation
 * key of any instance (the trust anchor of the local-vtpm variant).
 * Only the provider registers and unregisters nodes: the control endpoints need the bearer token that the CLI side
 * keeps in the workspace (constellation-local/control-token, 0600).
 *
 *   GET    /v1/self                  the caller's InstanceMetadata (403 for an unregistered source address)
 *   GET    /v1/peers                 all nodes' InstanceMetadata
 *   GET    /v1/load-balancer         {"endpoint": "<prefix>.1"}
 *   GET    /v1/init-secret-hash      {"initSecretHash": "<bcrypt hash>"}  ("" once the cluster is initialized)
 *   GET    /v1/join-service-key      {"joinServiceKey": "<base64 Ed25519 public key>"}
 *   GET    /v1/ak/<instance>         {"akPublic": base64 TPMT_PUBLIC, "role", "address"}, 404 for unknown instances
 *   PUT    /v1/control/cluster       {"initSecretHash","joinServiceKey"}      (token)
 *   PUT    /v1/control/nodes/<name>  {"role","group","address","akPublic"}   (token)
 *   DELETE /v1/control/nodes/<name>                                          (token)
 */
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { isIPv4 } from 'node:net';
import { JsonInputError, parseJson } from '../../lib/json.js';
import type { InstanceMetadata } from '../contract.js';

/** What the provider registers of a node (PUT /v1/control/nodes/<name>). */
export interface NodeRegistration {
  role: 'control-plane' | 'worker';
  group: string;
  /** IPv4. */
  address: string;
  /** TPMT_PUBLIC of the node's attestation key, base64. */
  akPublic: string;
}
export type RegisteredNode = NodeRegistration & { name: string };

/** PUT /v1/control/cluster. */
export interface ClusterSettings {
  initSecretHash: string;
  joinServiceKey: string;
}

/** What the metadata server and the load balancer know; the control API changes it. */
export class CloudRegistry {
  readonly nodes = new Map<string, RegisteredNode>();
  initSecretHash = '';
  joinServiceKey = '';

  byAddress(address: string): RegisteredNode | undefined {
    for (const node of this.nodes.values()) if (node.address === address) return node;
    return undefined;
  }

  controlPlaneAddresses(): string[] {
    return [...this.nodes.values()]
      .filter((n) => n.role === 'control-plane')
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((n) => n.address);
  }
}

export function instanceMetadata(node: RegisteredNode): InstanceMetadata {
  return { name: node.name, providerId: `local://${node.name}`, role: node.role, vpcIp: node.address };
}

const MAX_BODY = 64 * 1024;

class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: http.IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) reject(new RequestError(413, 'request body too large'));
      else chunks.push(c);
    });
    req.on('error', reject);
    req.on('end', () => {
      try {
        resolve(parseJson(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(new RequestError(400, `request body ${err instanceof JsonInputError ? err.message : 'is not JSON'}`));
      }
    });
  });
}

/*
 * The control bodies are checked by hand, not with a schema library: this module runs in the cloud daemon, whose
 * start is on the path to every node's boot, and loading zod was two thirds of that start's CPU.
 */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The body's fields, each checked; a 400 naming every field that is wrong. */
function checkBody<T>(value: unknown, fields: { [K in keyof T]: [ok: (v: unknown) => boolean, what: string] }): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new RequestError(400, 'body: must be a JSON object');
  const body = value as Record<string, unknown>;
  const problems = Object.entries(fields as Record<string, [(v: unknown) => boolean, string]>)
    .filter(([key, [ok]]) => !ok(body[key]))
    .map(([key, [, what]]) => `${key}: must be ${what}`);
  if (problems.length > 0) throw new RequestError(400, problems.join('; '));
  return Object.fromEntries(Object.keys(fields).map((key) => [key, body[key]])) as T;
}

const isString = (v: unknown): v is string => typeof v === 'string';

function nodeRegistration(body: unknown): NodeRegistration {
  return checkBody<NodeRegistration>(body, {
    role: [(v) => v === 'control-plane' || v === 'worker', '"control-plane" or "worker"'],
    group: [(v) => isString(v) && v !== '', 'a non-empty string'],
    address: [(v) => isString(v) && isIPv4(v), 'an IPv4 address'],
    akPublic: [(v) => isString(v) && v !== '' && BASE64.test(v), 'non-empty base64'],
  });
}

function clusterSettings(body: unknown): ClusterSettings {
  return checkBody<ClusterSettings>(body, {
    initSecretHash: [isString, 'a string'],
    joinServiceKey: [isString, 'a string'],
  });
}

/** One URL path segment, decoded; a malformed %-escape is the client's error (400), not the server's. */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new RequestError(
      400,
      `the path segment "${segment.slice(0, 64)}" is not validly URL-encoded (a "%" must start an escape of UTF-8 bytes)`,
    );
  }
}

/** IPv4-mapped IPv6 (::ffff:10.213.3.10) to plain IPv4. */
function sourceAddress(req: http.IncomingMessage): string {
  return (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
}

export interface MetadataServerOptions {
  registry: CloudRegistry;
  /** The gateway address, which is also the load balancer's. */
  gateway: string;
  controlToken: string;
}

export function createMetadataServer(options: MetadataServerOptions): http.Server {
  const { registry } = options;
  const token = Buffer.from(options.controlToken);

  const authorized = (req: http.IncomingMessage): boolean => {
    const given = Buffer.from((req.headers.authorization ?? '').replace(/^Bearer /, ''));
    return given.length === token.length && timingSafeEqual(given, token);
  };

  const handle = async (req: http.IncomingMessage): Promise<unknown> => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://metadata');
    } catch {
      throw new RequestError(400, 'the request target is not a valid URL path');
    }
    const parts = url.pathname.split('/').filter(Boolean).map(decodePathSegment);
    if (parts[0] !== 'v1') throw new RequestError(404, 'not found');
    const [, resource, name, extra] = parts;
    if (req.method === 'GET' && parts.length === 2) {
      switch (resource) {
        case 'self': {
          const node = registry.byAddress(sourceAddress(req));
          if (!node) throw new RequestError(403, `${sourceAddress(req)} is not the address of a node of this cluster`);
          return instanceMetadata(node);
        }
        case 'peers':
          return [...registry.nodes.values()].map(instanceMetadata);
        case 'load-balancer':
          return { endpoint: options.gateway };
        case 'init-secret-hash':
          return { initSecretHash: registry.initSecretHash };
        case 'join-service-key':
          return { joinServiceKey: registry.joinServiceKey };
      }
    }
    if (req.method === 'GET' && resource === 'ak' && name !== undefined && extra === undefined) {
      const node = registry.nodes.get(name);
      if (!node) throw new RequestError(404, `no attestation key registered for instance "${name}"`);
      return { akPublic: node.akPublic, role: node.role, address: node.address };
    }
    if (resource === 'control') {
      if (!authorized(req)) throw new RequestError(401, 'the control API needs the workspace control token');
      const [, , what, nodeName] = parts;
      if (req.method === 'PUT' && what === 'cluster' && nodeName === undefined) {
        const settings = clusterSettings(await readBody(req));
        registry.initSecretHash = settings.initSecretHash;
        registry.joinServiceKey = settings.joinServiceKey;
        return {};
      }
      if (what === 'nodes' && nodeName !== undefined && parts.length === 4) {
        if (req.method === 'PUT') {
          const registration = nodeRegistration(await readBody(req));
          const holder = registry.byAddress(registration.address);
          if (holder && holder.name !== nodeName)
            throw new RequestError(409, `${registration.address} belongs to ${holder.name}`);
          registry.nodes.set(nodeName, { ...registration, name: nodeName });
          return {};
        }
        if (req.method === 'DELETE') {
          registry.nodes.delete(nodeName);
          return {};
        }
      }
    }
    throw new RequestError(404, 'not found');
  };

  return http.createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      const data = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
      res.end(data);
    };
    handle(req).then(
      (body) => reply(200, body ?? {}),
      (err: unknown) =>
        reply(err instanceof RequestError ? err.status : 500, {
          error: err instanceof Error ? err.message : String(err),
        }),
    );
  });
}
