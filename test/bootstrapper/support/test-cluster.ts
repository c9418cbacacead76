/**
 * In-process nodes for the bootstrapper tests: each node has its own swtpm (PCRs 4, 9, 11 measured like the
 * local launcher does), its own gocryptfs state disk, its own loopback address and a real runBootstrapper; the
 * provider is played by an in-test metadata (NodeMetadata) and AK registry. Also the CLI's side of init and
 * recover (verifier as gRPC client), recording what it put on the wire.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import bcrypt from 'bcryptjs';
import { runBootstrapper, type Bootstrapper } from '../../../bootstrapper/bootstrapper.js';
import { createBackend, type KubernetesBackend } from '../../../bootstrapper/kubernetes/backend.js';
import { EtcdMember } from '../../../bootstrapper/etcd-member.js';
import { openGocryptfsStateDisk, type GocryptfsStateDisk } from '../../../bootstrapper/state-disk.js';
import {
  attestedChannelOptions,
  createAttestedClientCredentials,
  initClientAdapter,
  recoverClientAdapter,
  verifierClient,
} from '../../../lib/atls/index.js';
import type { AkRegistry, Measurements, RegisteredInstance, Validator } from '../../../lib/attestation/types.js';
import * as localVtpm from '../../../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../../../lib/attestation/vtpm-issuer.js';
import { createLogger } from '../../../lib/logging/index.js';
import { deriveJoinServiceKeySeed, joinServicePublicKey } from '../../../lib/kms/index.js';
import { TpmClient } from '../../../lib/tpm/client.js';
import { TPM_ALG } from '../../../lib/tpm/constants.js';
import { powerCycleSwtpm, startSwtpm, type SwtpmHandle } from '../../../lib/tpm/swtpm.js';
import {
  InitClient,
  InitResult,
  InitSecrets,
  type InitRequest,
  type InitResponse,
} from '../../../proto/gen/constellation/init.js';
import {
  RecoverSecrets,
  RecoveryClient,
  type RecoverRequest,
  type RecoverResponse,
} from '../../../proto/gen/constellation/recover.js';
import { VerifyClient, type NodeStatus } from '../../../proto/gen/constellation/verify.js';
import type { InstanceMetadata, NodeMetadata, NodeRole } from '../../../providers/contract.js';

export const KUBERNETES_VERSION = 'v1.31.1';
const STEP_TIMEOUT_MS = 20_000;

/**
 * Addresses for one test cluster's nodes in a random 127.X.Y.0/24 (X of 100–199: the local provider uses 127.0.N),
 * so that clusters of test runs on the same machine at the same time do not meet on fixed addresses and ports
 * (the etcd member listens on <node address>:2379).
 */
export function loopbackNet(): (host: number) => string {
  const [x, y] = [100 + randomInt(100), randomInt(256)];
  return (host) => `127.${x}.${y}.${host}`;
}

/** A port that was free a moment ago (for the join service, which every node must find at the same port). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** What the provider knows: nodes, load balancer, init-secret hash, registered AKs. */
export class TestProvider implements AkRegistry {
  readonly nodes: InstanceMetadata[] = [];
  readonly aks = new Map<string, Uint8Array>();
  loadBalancer = '';
  initSecretHash = '';
  /** The join-service identity key's public half (base64), as `create` publishes it. */
  joinServiceKey = '';

  async lookup(instance: string): Promise<RegisteredInstance | undefined> {
    const akPublic = this.aks.get(instance);
    const node = this.nodes.find((n) => n.name === instance);
    return akPublic && { akPublic, ...(node ? { addresses: [node.vpcIp] } : {}) };
  }

  metadataFor(name: string): NodeMetadata {
    return {
      self: async () => this.nodes.find((n) => n.name === name)!,
      peers: async () => [...this.nodes],
      loadBalancerEndpoint: async () => this.loadBalancer,
      initSecretHash: async () => this.initSecretHash,
      joinServiceKey: async () => this.joinServiceKey,
    };
  }
}

export interface TestNodeOptions {
  name: string;
  ip: string;
  role: NodeRole;
  /** Register the node's AK with the provider (default true). */
  register?: boolean;
  /** Measure a different image into PCR 9 (a tampered initramfs). */
  tamperedImage?: boolean;
}

export class TestNode {
  bootstrapper!: Bootstrapper;
  /** The Kubernetes backend of the current boot (none); its token sink holds what the node's join service issued. */
  backend!: KubernetesBackend;
  disk!: GocryptfsStateDisk;
  readonly log: string[] = [];
  /** Extra time the node's cluster store takes to resume after a reboot (a loaded VM's etcd start). */
  storeResumeDelayMs = 0;
  akPublic!: Uint8Array;

  private constructor(
    readonly options: TestNodeOptions,
    readonly cluster: TestCluster,
    readonly dir: string,
    readonly swtpm: SwtpmHandle,
    readonly tpm: TpmClient,
  ) {}

  static async start(cluster: TestCluster, options: TestNodeOptions): Promise<TestNode> {
    const dir = path.join(cluster.dir, options.name);
    await fs.mkdir(dir, { recursive: true });
    const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
    let tpm: TpmClient | undefined;
    try {
      tpm = await TpmClient.connect(swtpm.serverSocket);
      const node = new TestNode(options, cluster, dir, swtpm, tpm);
      node.akPublic = (await tpm.attestationKey()).publicArea;
      if (options.register ?? true) cluster.provider.aks.set(options.name, node.akPublic);
      cluster.provider.nodes.push({
        name: options.name,
        providerId: `test://${options.name}`,
        role: options.role,
        vpcIp: options.ip,
      });
      await node.boot();
      return node;
    } catch (err) {
      tpm?.close();
      await swtpm.stop();
      throw err;
    }
  }

  get name(): string {
    return this.options.name;
  }

  /** What the launcher does before the bootstrapper starts: measure the image, then start the bootstrapper. */
  private async boot(): Promise<void> {
    for (const index of [4, 9, 11]) {
      const part = index === 9 && this.options.tamperedImage ? 'tampered initramfs' : `image part ${index}`;
      await this.tpm.pcrExtend(index, [
        { hashAlg: TPM_ALG.SHA256, digest: createHash('sha256').update(part).digest() },
      ]);
    }
    this.disk = await openGocryptfsStateDisk({
      diskDir: path.join(this.dir, 'state-disk'),
      mountPoint: path.join(this.dir, 'state'),
    });
    this.backend = createBackend('none', { workDir: path.join(this.disk.mountPoint, 'kubernetes') });
    const store = new EtcdMember({
      name: this.name,
      ip: this.options.ip,
      dir: path.join(this.disk.mountPoint, 'etcd'),
      logFile: path.join(this.dir, 'etcd.log'),
      clock: () => new Date(),
      logger: createLogger((line) => this.log.push(line), { node: this.name, component: 'cluster-store' }),
    });
    const resume = store.resume.bind(store);
    store.resume = async () => {
      await new Promise((resolve) => setTimeout(resolve, this.storeResumeDelayMs));
      return resume();
    };
    this.bootstrapper = await runBootstrapper({
      node: { name: this.name, ip: this.options.ip, role: this.options.role },
      tpm: this.tpm,
      issuer: new VtpmIssuer({
        variant: localVtpm.VARIANT,
        tpm: this.tpm,
        instanceInfo: localVtpm.localInstanceInfo(this.name),
      }),
      metadata: this.cluster.provider.metadataFor(this.name),
      stateDisk: this.disk,
      backend: this.backend,
      joinService: { validatorDeps: { akRegistry: this.cluster.provider } },
      store,
      logger: createLogger((line) => this.log.push(line), { node: this.name }),
      logTail: () => Buffer.from(this.log.slice(-50).join('\n')),
      ports: { init: 0, verify: 0, recovery: 0, join: this.cluster.joinPort },
      retry: { initialMs: 50, maxMs: 250, unreachableMaxMs: 250 },
      stepTimeoutMs: STEP_TIMEOUT_MS,
    });
  }

  /** A reboot: the bootstrapper stops, the TPM resets (PCRs to zero), the disk closes; then boot again. */
  async reboot(): Promise<void> {
    await this.bootstrapper.close();
    await this.disk.close();
    await powerCycleSwtpm(this.swtpm.ctrlSocket, { client: this.tpm });
    await this.boot();
  }

  async pcr(index: number): Promise<Buffer> {
    return Buffer.from((await this.tpm.pcrRead(TPM_ALG.SHA256, [index])).get(index)!);
  }

  address(port: number): string {
    return `${this.options.ip}:${port}`;
  }

  async stop(): Promise<void> {
    await this.bootstrapper?.close();
    await this.disk?.close().catch(() => undefined);
    this.tpm.close();
    await this.swtpm.stop();
  }
}

export class TestCluster {
  readonly nodes: TestNode[] = [];
  readonly initSecret = randomBytes(32);
  readonly masterKey = randomBytes(32);
  readonly masterSalt = randomBytes(32);
  readonly measurementSalt = randomBytes(32);
  measurements: Measurements = {};

  private constructor(
    readonly dir: string,
    readonly provider: TestProvider,
    readonly joinPort: number,
  ) {}

  static async create(): Promise<TestCluster> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bootstrapper-'));
    const cluster = new TestCluster(dir, new TestProvider(), await freePort());
    // bcrypt cost 4: the comparison is what is tested, not the cost. The CLI hashes the secret's hex form.
    cluster.provider.initSecretHash = bcrypt.hashSync(cluster.initSecret.toString('hex'), 4);
    cluster.provider.joinServiceKey = Buffer.from(
      joinServicePublicKey(deriveJoinServiceKeySeed(cluster.initSecret.toString('hex'))),
    ).toString('base64');
    return cluster;
  }

  async startNode(options: TestNodeOptions): Promise<TestNode> {
    const node = await TestNode.start(this, options);
    this.nodes.push(node);
    if (options.role === 'control-plane' && !this.provider.loadBalancer) this.provider.loadBalancer = options.ip;
    if (options.role === 'control-plane' && Object.keys(this.measurements).length === 0) {
      // The expected measurements are those of the first (untampered) control plane's image.
      const pcrs = await node.tpm.pcrRead(TPM_ALG.SHA256, [4, 8, 9, 11, 12, 13]);
      this.measurements = Object.fromEntries(
        [...pcrs].map(([i, v]) => [String(i), { expected: Buffer.from(v).toString('hex'), warnOnly: false }]),
      );
    }
    return node;
  }

  validator(measurements: Measurements = this.measurements): Validator {
    return localVtpm.createValidator({ measurements }, { akRegistry: this.provider });
  }

  initSecrets(overrides: Partial<InitSecrets> = {}): InitSecrets {
    return InitSecrets.fromPartial({
      masterKey: this.masterKey,
      masterSalt: this.masterSalt,
      initSecret: Buffer.from(this.initSecret.toString('hex')),
      measurementSalt: this.measurementSalt,
      kubernetesVersion: KUBERNETES_VERSION,
      clusterName: 'test',
      attestationConfig: Buffer.from(
        JSON.stringify({ variant: localVtpm.VARIANT, config: { measurements: this.measurements } }),
      ),
      ...overrides,
    });
  }

  async close(): Promise<void> {
    for (const node of this.nodes.splice(0)) await node.stop().catch(() => undefined);
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

export interface CliOutcome<T> {
  result?: T;
  error?: Error;
  progress: string[];
  /** The oneof cases of every message the CLI sent, in order. */
  sent: string[];
}

/** Records the oneof case of every message written to a client stream. */
function recordWrites<T extends { kind?: { $case: string } }>(
  call: ClientDuplexStream<T, unknown>,
  sent: string[],
): void {
  const write = call.write.bind(call) as (message: T) => boolean;
  (call as { write: (message: T) => boolean }).write = (message: T) => {
    sent.push(message.kind?.$case ?? 'empty');
    return write(message);
  };
}

/** The CLI's side of init: verifies the node, seals the secrets, collects progress and opens the InitResult. */
export async function cliInit(
  address: string,
  validator: Validator,
  secrets: InitSecrets,
): Promise<CliOutcome<InitResult>> {
  const client = new InitClient(address, await createAttestedClientCredentials(), {
    ...attestedChannelOptions,
    'test.connection': Math.random(),
  });
  const call: ClientDuplexStream<InitRequest, InitResponse> = client.init();
  const outcome: CliOutcome<InitResult> = { progress: [], sent: [] };
  recordWrites(call, outcome.sent);
  try {
    const session = await verifierClient(call, initClientAdapter, {
      purpose: 'init',
      peer: 'the node',
      validator,
      expectReply: true,
      timeoutMs: STEP_TIMEOUT_MS,
      secrets: () => InitSecrets.encode(secrets).finish(),
    });
    for (;;) {
      const message = await session.channel.receive(['progress', 'sealed'], 'the init result');
      if (message.kind === 'sealed') {
        outcome.result = InitResult.decode(await session.unseal(message.value.jwe));
        break;
      }
      outcome.progress.push(message.value.step);
    }
  } catch (err) {
    outcome.error = err as Error;
  } finally {
    client.close();
  }
  return outcome;
}

/** The CLI's side of recover: verifies the node, seals the master secret, waits for RecoverDone. */
export async function cliRecover(
  address: string,
  validator: Validator,
  secrets: RecoverSecrets,
): Promise<CliOutcome<string>> {
  const client = new RecoveryClient(address, await createAttestedClientCredentials(), {
    ...attestedChannelOptions,
    'test.connection': Math.random(),
  });
  const call: ClientDuplexStream<RecoverRequest, RecoverResponse> = client.recover();
  const outcome: CliOutcome<string> = { progress: [], sent: [] };
  recordWrites(call, outcome.sent);
  try {
    const session = await verifierClient(call, recoverClientAdapter, {
      purpose: 'recover',
      peer: 'the node',
      validator,
      timeoutMs: STEP_TIMEOUT_MS,
      secrets: () => RecoverSecrets.encode(secrets).finish(),
    });
    const done = await session.channel.receive(['other'], 'the recovery result');
    if (done.value.kind?.$case === 'done') outcome.result = done.value.kind.value.diskUuid;
  } catch (err) {
    outcome.error = err as Error;
  } finally {
    client.close();
  }
  return outcome;
}

/** GetStatus of a node's verify service. */
export async function getStatus(address: string): Promise<NodeStatus> {
  const client = new VerifyClient(address, await createAttestedClientCredentials(), attestedChannelOptions);
  try {
    return await new Promise<NodeStatus>((resolve, reject) =>
      client.getStatus({ knownState: '', waitMs: 0 }, (err, status) => (err ? reject(err) : resolve(status))),
    );
  } finally {
    client.close();
  }
}
