/**
 * Stand-ins for unit tests of cli/cluster: a software "attestation" (issuer + validator comparing PCR values, bound
 * to nonce and userData like the real thing), an in-process node serving Init (port 0) and GetStatus over the real
 * gRPC services and lib/atls, and an in-memory InfrastructureProvider.
 */
import type { Server } from '@grpc/grpc-js';
import {
  AttestationError,
  type AttestationDocument,
  type Issuer,
  type Measurements,
  type ValidationResult,
  type Validator,
} from '../../../lib/attestation/types.js';
import { deriveClusterId, deriveMeasurementSecret } from '../../../lib/kms/index.js';
import type {
  CreateRequest,
  CreateResult,
  InfrastructureProvider,
  Instance,
  ProviderContext,
} from '../../../providers/contract.js';
import type { InitSecrets } from '../../../proto/gen/constellation/init.js';
import { NodeStatus, type VerifyServer } from '../../../proto/gen/constellation/verify.js';

export const KUBECONFIG = 'apiVersion: v1\nkind: Config\n';

export class StandInIssuer implements Issuer {
  readonly variant = 'local-vtpm';
  constructor(readonly pcrs: Record<string, string>) {}

  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument> {
    return {
      variant: this.variant,
      attestation: { pcrs: this.pcrs, nonce: Buffer.from(nonce).toString('base64') },
      instanceInfo: '',
      userData: Buffer.from(userData).toString('base64'),
    };
  }
}

export class StandInValidator implements Validator {
  readonly variant = 'local-vtpm';
  constructor(private readonly measurements: Measurements) {}

  async validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult> {
    const att = document.attestation as { pcrs: Record<string, string>; nonce: string };
    if (att.nonce !== Buffer.from(nonce).toString('base64')) throw new AttestationError('stale nonce');
    const comparisons = Object.entries(this.measurements).map(([i, m]) => ({
      index: Number(i),
      expected: m.expected,
      actual: att.pcrs[i],
      warnOnly: m.warnOnly,
      match: att.pcrs[i] === m.expected,
    }));
    const bad = comparisons.find((c) => !c.match && !c.warnOnly);
    if (bad)
      throw new AttestationError(
        `PCR ${bad.index}: expected ${bad.expected}, got ${bad.actual} (enforced)`,
        comparisons,
      );
    return {
      userData: new Uint8Array(Buffer.from(document.userData, 'base64')),
      pcrs: new Map(Object.entries(att.pcrs).map(([i, v]) => [Number(i), Buffer.from(v, 'hex')])),
      comparisons,
      warnings: [],
    };
  }
}

export const standInValidatorFactory = async (_variant: string, config: { measurements: Measurements }) =>
  new StandInValidator(config.measurements);

export interface StandInNodeOptions {
  issuer: Issuer;
  /** What Init does after it received the secrets. */
  init?: 'succeed' | 'fail';
  /** The answer to GetStatus; `peer` is the caller's address (its port tells its connection). */
  status?: (peer: string) => Partial<NodeStatus>;
  /** GetStatus served by this handler instead (a bootstrapper's own, bootstrapper/verify-server.ts). */
  getStatus?: VerifyServer['getStatus'];
  /** Called when the challenge arrives (before anything secret could have been sent). */
  onChallenge?: () => void;
  /** The Kubernetes backend Init reports (default `none`: no kubeconfig is written for it). */
  kubernetesBackend?: string;
}

export interface StandInNode {
  port: number;
  /** Secrets received, one per successful exchange. */
  received: InitSecrets[];
  /** Exchanges the verifier ended without sealing anything. */
  unsealed: number;
  close(): Promise<void>;
}

export async function startStandInNode(options: StandInNodeOptions): Promise<StandInNode> {
  const grpc = await import('@grpc/grpc-js');
  const atls = await import('../../../lib/atls/index.js');
  const {
    InitService,
    InitSecrets: InitSecretsCodec,
    InitResult,
  } = await import('../../../proto/gen/constellation/init.js');
  const { VerifyService } = await import('../../../proto/gen/constellation/verify.js');
  const node: StandInNode = { port: 0, received: [], unsealed: 0, close: async () => undefined };
  const server: Server = new grpc.Server();
  server.addService(InitService, {
    init: (call: Parameters<typeof atls.attestedServer>[0]) => {
      call.on('data', () => options.onChallenge?.());
      void (async () => {
        let session;
        try {
          session = await atls.attestedServer(call, atls.initServerAdapter, {
            purpose: 'init',
            peer: 'the CLI',
            issuer: options.issuer,
          });
        } catch {
          node.unsealed++;
          return;
        }
        const secrets = InitSecretsCodec.decode(session.secrets);
        node.received.push(secrets);
        session.channel.send({ kind: 'progress', value: { step: 'keys', message: 'derived the keys' } });
        if (options.init === 'fail') {
          session.channel.fail('the backend broke', Buffer.from('node log line 1\nnode log line 2\n'));
          return;
        }
        const clusterId = deriveClusterId(
          deriveMeasurementSecret({ key: secrets.masterKey, salt: secrets.masterSalt }),
          secrets.measurementSalt,
        );
        const result = InitResult.encode({
          kubeconfig: Buffer.from(KUBECONFIG),
          clusterId: Buffer.from(clusterId),
          kubernetesBackend: options.kubernetesBackend ?? 'none',
          storeCredentials: Buffer.alloc(0),
        }).finish();
        session.channel.send({ kind: 'sealed', value: { jwe: await session.sealToVerifier(result) } });
        session.channel.end();
      })();
    },
  } as never);
  server.addService(VerifyService, {
    getAttestation: (_call: unknown, cb: (err: unknown) => void) => cb({ code: 12, details: 'not here' }),
    getStatus:
      options.getStatus ??
      ((call: { getPeer(): string }, cb: (err: unknown, res?: NodeStatus) => void) =>
        cb(
          null,
          NodeStatus.fromPartial(
            options.status?.(call.getPeer()) ?? { name: 'node', role: 'control-plane', state: 'waiting' },
          ),
        )),
  } as never);
  const credentials = await atls.createAttestedServerCredentials();
  node.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (err, port) => (err ? reject(err) : resolve(port))),
  );
  node.close = () => new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  return node;
}

/** An InfrastructureProvider in memory: records its calls; instances answer on 127.0.0.1. */
export class MemoryProvider implements InfrastructureProvider {
  readonly name: string;
  readonly requests: CreateRequest[] = [];
  terminated = 0;
  instances: Instance[] = [];
  /** Runs inside create, e.g. to look at the workspace at that moment. */
  onCreate?: (request: CreateRequest, ctx: ProviderContext) => Promise<void> | void;

  constructor(name = 'local') {
    this.name = name;
  }

  async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    this.requests.push(request);
    await this.onCreate?.(request, ctx);
    ctx.progress?.('made the nodes');
    this.instances = request.nodeGroups.flatMap((g) =>
      Array.from({ length: g.initialCount }, (_, i) => ({
        id: `${g.role}-${i}`,
        name: `${g.role}-${i}`,
        role: g.role,
        nodeGroup: g.name,
        privateIp: '127.0.0.1',
        state: 'running' as const,
      })),
    );
    return {
      clusterEndpoint: '127.0.0.1',
      inClusterEndpoint: '127.0.0.1',
      apiServerCertSANs: ['127.0.0.1'],
      providerState: { prefix: '127.0.0' },
    };
  }

  async listInstances(): Promise<Instance[]> {
    return this.instances;
  }

  async scaleNodeGroup(): Promise<void> {}

  async terminate(): Promise<void> {
    this.terminated++;
    this.instances = [];
  }
}

/** A measuring provider (like the local one): it knows the PCRs of its image. */
export class MeasuringMemoryProvider extends MemoryProvider {
  constructor(readonly measurements: Measurements) {
    super('local');
  }

  async expectedMeasurements(): Promise<Measurements> {
    return this.measurements;
  }
}
