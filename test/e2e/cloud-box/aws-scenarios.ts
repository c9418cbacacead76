/**
 * Cloud in a box on AWS, beyond create and init: `upgrade apply` of a 3 + 2 cluster to a new image, and `apply`
 * scaling control planes and workers up and down, through the production orchestration (cli/cluster) with the AWS
 * provider at the fake. The fake behaves as AWS documents it (test/fakes/aws): EC2 answers `*.NotFound` to the first
 * call naming a new resource and for a while after its create (eventual consistency), a deregistered target drains
 * before it is gone, the load balancer sends new connections only to registered, running targets in the zones it is
 * enabled in, and a group whose desired capacity drops chooses its own victim. The box plays the hypervisor: every instance the fake runs boots as
 * a node, every node whose instance terminated stops; its load balancer sends to what the fake's load balancer would.
 * What is not AWS's own (the box following a fake's instances, the join-service probe, publishing images, `upgrade
 * apply` and `apply` in process, the store's health) takes any cloud's cluster (BoxCluster) and serves the GCP and
 * Azure scenarios too (./gcp-azure-scenarios.ts).
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { parseDocument } from 'yaml';
import { applyConfig } from '../../../cli/cluster/apply.js';
import { withWorkspaceSession } from '../../../cli/cluster/session.js';
import { workspaceStoreHealth } from '../../../cli/cluster/store.js';
import { loadConfig, measurementsOf } from '../../../lib/config/index.js';
import { upgradeCluster, type UpgradeResult } from '../../../cli/cluster/upgrade.js';
import type { Measurements } from '../../../lib/attestation/types.js';
import type { VariantName } from '../../../lib/attestation/variant-table.js';
import { testSigner, writeSignedFile } from '../../images/support.js';
import { createLogger } from '../../../lib/logging/index.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import type { AwsProviderOptions } from '../../../providers/aws/options.js';
import type { InfrastructureProvider, Instance } from '../../../providers/contract.js';
import type { EndorsementKey, SnpTestCa } from '../../attestation/snp/fixtures.js';
import { FAKE_CREDENTIALS } from '../../fakes/aws/server.js';
import type { CloudBox } from './box.js';
import { awsCloud, type AwsBoxCloud, type BoxCloud } from './clouds.js';
import { bootNode, teeFor, upCluster } from './scenario.js';

const JOIN_PORT = 30090;

/** The AMI the rollout moves to. */
export const NEW_IMAGE = 'ami-0b0a7d0000000002a';

export interface AwsScenarioOptions {
  workspace: string;
  box: CloudBox;
  ca: SnpTestCa;
  octet: number;
  /** EC2's eventual-consistency window in the fake (ms). */
  consistencyMs?: number;
  /** The same in calls: how many calls naming a new resource do not find it (default 1, whatever the machine's load). */
  consistencyMisses?: number;
  /** How long a deregistered target drains in the fake (ms). */
  drainMs?: number;
  /** Initial node counts (default 1 + 2). */
  controlPlanes?: number;
  workers?: number;
}

/** A running cluster in the box, with the box following the fake's instances. */
export interface BoxCluster {
  cloud: BoxCloud;
  good: EndorsementKey;
  clusterEndpoint: string;
  /** The provider at the fake, booting `image` for added nodes. */
  infrastructure(image?: string): InfrastructureProvider;
  /** create + boot + init, ms. */
  upMs: number;
  close(): Promise<void>;
}

/** A running AWS cluster in the box. */
export interface AwsBoxCluster extends BoxCluster {
  cloud: AwsBoxCloud;
  infrastructure(image?: string): AwsInfrastructure;
}

/** config (default 1 control plane, 2 workers), create, boot, init; then the box follows the fake's instances. */
export async function upAwsCluster(options: AwsScenarioOptions): Promise<AwsBoxCluster> {
  const base = await awsCloud(options.workspace, options.octet, {
    consistencyMs: options.consistencyMs ?? 300,
    consistencyMisses: options.consistencyMisses ?? 1,
    drainMs: options.drainMs ?? 300,
  });
  return upBoxCluster(base, 'aws', options, (image) => new AwsInfrastructure(providerOptions(base, image)));
}

/** The node counts of `options` on top of the cloud's config, create, boot, init; then the box follows the fake. */
export async function upBoxCluster<C extends BoxCloud, I extends InfrastructureProvider>(
  base: C,
  provider: string,
  options: Pick<AwsScenarioOptions, 'workspace' | 'box' | 'ca' | 'controlPlanes' | 'workers'>,
  infrastructure: (image?: string) => I,
): Promise<BoxCluster & { cloud: C; infrastructure(image?: string): I }> {
  const { workspace, box, ca } = options;
  const cloud: C = Object.assign(Object.create(base) as C, {
    configure(doc: Parameters<BoxCloud['configure']>[0], tcb: Parameters<BoxCloud['configure']>[1]) {
      base.configure(doc, tcb);
      doc.setIn(['nodeGroups', 'control_plane_default', 'initialCount'], options.controlPlanes ?? 1);
      doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], options.workers ?? 2);
    },
  });
  // A cluster that did not come up closes its fake here: the caller has nothing to close it with.
  const up = await upCluster(cloud, box, ca, workspace, provider).catch(async (err: unknown) => {
    await base.close();
    throw err;
  });
  const follower = followInstances(cloud, box, ca, up.good);
  const clusterEndpoint = await readEndpoint(workspace);
  return {
    cloud,
    good: up.good,
    clusterEndpoint,
    infrastructure,
    upMs: up.elapsedMs,
    async close() {
      await follower.stop();
    },
  };
}

function providerOptions(cloud: AwsBoxCloud, image?: string): AwsProviderOptions {
  return {
    endpoint: cloud.fake.url,
    credentials: FAKE_CREDENTIALS,
    region: 'us-east-2',
    retryDelayMs: 20,
    pollIntervalMs: 100,
    waiter: { minDelaySeconds: 0.05, maxDelaySeconds: 0.2, maxWaitSeconds: 120 },
    ...(image ? { image } : {}),
  };
}

async function readEndpoint(workspace: string): Promise<string> {
  const state = parseDocument(await fs.readFile(path.join(workspace, 'constellation-state.yaml'), 'utf8'));
  return String(state.getIn(['infrastructure', 'clusterEndpoint']));
}

/**
 * The hypervisor side of the box: every 100 ms, an instance the fake runs that has no node yet boots (a genuine node
 * of the cluster), and a node whose instance the fake terminated stops.
 */
function followInstances(
  cloud: BoxCloud,
  box: CloudBox,
  ca: SnpTestCa,
  good: EndorsementKey,
): { stop(): Promise<void> } {
  const booting = new Map<string, Promise<unknown>>();
  let stopped = false;
  let tick: Promise<void> = Promise.resolve();
  const step = async () => {
    const running = cloud.running();
    for (const instance of running) {
      if (box.has(instance.id) || booting.has(instance.id)) continue;
      booting.set(
        instance.id,
        bootNode(box, cloud, ca, instance, teeFor(ca, good, cloud.signingKind)).catch((err: unknown) =>
          console.error(`box: booting ${instance.id} failed: ${String(err)}`),
        ),
      );
    }
    const live = new Set(running.map((i) => i.id));
    for (const node of box.booted) {
      if (!live.has(node.instance.id)) await box.stop(node.instance.id);
    }
  };
  const timer = setInterval(() => {
    tick = tick.then(step);
  }, 100);
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await tick;
      await Promise.all(booting.values());
    },
  };
}

/**
 * Opens a TLS connection to the join service through the load balancer every 100 ms; counts what failed: an error, or
 * no handshake within 3 s. The 3 s are counted on the prober's own clock of the time this process ran: when the test
 * process itself was not scheduled (a tick of its 100 ms timer came late, e.g. while other clusters of the suite boot
 * on a loaded machine), the handshake could not progress here either, so only up to two intervals of each tick's gap
 * count. A load balancer or join service that does not answer still fails the probe.
 */
export function probeJoinService(host: string): { stop(): { probes: number; failures: string[] } } {
  const HANDSHAKE_MS = 3000;
  const INTERVAL_MS = 100;
  let probes = 0;
  const failures: string[] = [];
  /** Open sockets; those still without a handshake, with the prober's clock when they started. */
  const open = new Set<tls.TLSSocket>();
  const handshaking = new Map<tls.TLSSocket, number>();
  let awakeMs = 0;
  let last = performance.now();
  const tick = () => {
    const now = performance.now();
    awakeMs += Math.min(now - last, 2 * INTERVAL_MS);
    last = now;
    for (const [socket, startedAt] of handshaking)
      if (awakeMs - startedAt > HANDSHAKE_MS)
        socket.destroy(new Error(`no TLS handshake within ${HANDSHAKE_MS / 1000} s`));
    probes++;
    const socket = tls.connect({ host, port: JOIN_PORT, rejectUnauthorized: false, ALPNProtocols: ['h2'] });
    open.add(socket);
    handshaking.set(socket, awakeMs);
    socket.once('secureConnect', () => {
      handshaking.delete(socket);
      socket.end();
    });
    socket.once('error', (err) => failures.push(`${new Date().toISOString()} ${err.message}`));
    socket.once('close', () => {
      handshaking.delete(socket);
      open.delete(socket);
    });
  };
  const timer = setInterval(tick, INTERVAL_MS);
  return {
    stop() {
      clearInterval(timer);
      for (const socket of open) socket.destroy();
      return { probes, failures };
    },
  };
}

/** A version index with the cluster's image and the new one (default NEW_IMAGE), each with the config's measurements signed by a test key. */
export async function publishImages(
  workspace: string,
  currentImage: string,
  target: { variant?: VariantName; image?: string } = {},
): Promise<{ index: string }> {
  const variant: VariantName = target.variant ?? 'aws-sev-snp';
  const signer = testSigner();
  const config = await loadConfig(workspace);
  const measurements: Measurements = measurementsOf(config);
  const dir = path.join(workspace, '..', 'images');
  const entries = [];
  for (const [version, image] of [
    ['v1.0.0', currentImage],
    ['v1.1.0', target.image ?? NEW_IMAGE],
  ] as const) {
    const { file, signature } = await writeSignedFile(
      path.join(dir, version),
      'measurements.json',
      { version, variant, measurements },
      signer,
    );
    entries.push({ version, image, variant, measurementsUrl: file, signatureUrl: signature });
  }
  const index = path.join(dir, 'index.json');
  await fs.writeFile(index, JSON.stringify({ images: entries }));
  await editConfig(workspace, (doc) => doc.setIn(['measurementsSigningKey'], signer.publicKeyPem));
  return { index };
}

/** `upgrade apply` to `image` (default NEW_IMAGE), in process, with the provider at the fake. */
export async function upgradeToNewImage(
  cluster: BoxCluster,
  ca: SnpTestCa,
  workspace: string,
  index: string,
  image = NEW_IMAGE,
): Promise<UpgradeResult> {
  await editConfig(workspace, (doc) => doc.setIn(['image'], image));
  const validatorDeps = { ...(await cluster.cloud.validatorDeps()), amdRoots: ca.roots };
  return withWorkspaceSession(workspace, 'upgrade apply', ({ workspaceDir, journal, log }) =>
    upgradeCluster({
      workspaceDir,
      log,
      journal,
      provider: cluster.infrastructure(image),
      imageSource: { index },
      validatorDeps,
      joinTimeoutMs: 180_000,
      pollIntervalMs: 200,
    }),
  );
}

export async function editConfig(
  workspace: string,
  edit: (doc: ReturnType<typeof parseDocument>) => void,
): Promise<void> {
  const file = path.join(workspace, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  edit(doc);
  await fs.writeFile(file, doc.toString({ lineWidth: 0 }));
}

/** `apply` with the config's node counts, in process (infrastructure phase only: the cluster is initialized). */
export async function applyCounts(
  cluster: BoxCluster,
  workspace: string,
  controlPlanes: number,
  workers: number,
): Promise<Record<string, [number, number]>> {
  await editConfig(workspace, (doc) => {
    doc.setIn(['nodeGroups', 'control_plane_default', 'initialCount'], controlPlanes);
    doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], workers);
  });
  const config = await loadConfig(workspace);
  const result = await withWorkspaceSession(workspace, 'apply', ({ workspaceDir, journal, log }) =>
    applyConfig({
      workspaceDir,
      log,
      journal,
      provider: cluster.infrastructure(config.image),
      skip: new Set(['attestationconfig', 'image', 'k8s']),
      joinTimeoutMs: 180_000,
    }),
  );
  return result.scaled;
}

/** The cluster's instances as the provider lists them (running ones). */
export async function listRunning(cluster: BoxCluster, workspace: string): Promise<Instance[]> {
  return withWorkspaceSession(workspace, 'status', async ({ workspaceDir, journal, log }) =>
    (
      await cluster.infrastructure().listInstances({
        journal: (await import('../../../lib/workspace/journal-views.js')).clusterJournalView(journal),
        log,
        workspaceDir,
      })
    ).filter((i) => i.state === 'running'),
  );
}

/** The etcd cluster store's health as `status` reports it. */
export async function storeHealth(cluster: BoxCluster, workspace: string) {
  const instances = await listRunning(cluster, workspace);
  const health = await workspaceStoreHealth(
    workspace,
    instances,
    createLogger(() => undefined),
  );
  assert.ok(health, 'the workspace has store credentials');
  return health;
}
