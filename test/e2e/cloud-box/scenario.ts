/**
 * The steps the cloud-in-a-box test and benchmark share: generate the workspace's config, `create` against the
 * fake, boot every launched instance (in parallel, as a cloud does), put the load balancer on the cluster
 * endpoint, wait for the node programs, and `init` through the production orchestration (cli/cluster/init.ts) with
 * the cloud's verifier collaborators plus the test ARK, the only place the test chain is trusted on the CLI side.
 */
import { initCluster, type InitClusterResult } from '../../../cli/cluster/init.js';
import { withWorkspaceSession } from '../../../cli/cluster/session.js';
import { verifyCluster, type VerifyResult } from '../../../cli/cluster/verify.js';
import { clusterJournalView } from '../../../lib/workspace/journal-views.js';
import { createLogger } from '../../../lib/logging/index.js';
import { FileResourceJournal } from '../../../lib/workspace/resource-journal.js';
import { makeEndorsementKey, type EndorsementKey, type SnpTestCa } from '../../attestation/snp/fixtures.js';
import type { BoxInstance, CloudBox } from './box.js';
import { generateConfig, type BoxCloud } from './clouds.js';
import type { BoxTee } from './node-program.js';

export function teeFor(ca: SnpTestCa, key: EndorsementKey, kind: 'vcek' | 'vlek', extra: Partial<BoxTee> = {}): BoxTee {
  return {
    product: ca.product,
    kind,
    keyPem: key.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    certPem: key.cert.pem,
    chipIdHex: Buffer.from(key.chipId).toString('hex'),
    tcb: key.tcb,
    askPem: (kind === 'vcek' ? ca.ask : ca.asvk).pem,
    arkPem: ca.ark.pem,
    ...extra,
  };
}

/** Boots one VM of the cloud with the given TEE (its node trusts only the test ARK). */
export async function bootNode(box: CloudBox, cloud: BoxCloud, ca: SnpTestCa, instance: BoxInstance, tee: BoxTee) {
  return box.boot(instance, { ...(await cloud.node(instance, tee)), trustedRoots: ca.roots });
}

export interface UpResult {
  init: InitClusterResult;
  /** The endorsement key the cluster's genuine nodes sign with. */
  good: EndorsementKey;
  /** create + boot + init, wall time, ms. */
  elapsedMs: number;
}

/** Config, create, boot, load balancer, init: a 1 + 2 cluster on `cloud`, every node genuine. */
export async function upCluster(
  cloud: BoxCloud,
  box: CloudBox,
  ca: SnpTestCa,
  workspace: string,
  provider: string,
): Promise<UpResult> {
  const good = makeEndorsementKey(ca, { kind: cloud.signingKind });
  await generateConfig(workspace, provider, cloud.variant, (doc) => cloud.configure(doc, good.tcb));
  const started = Date.now();
  const { clusterEndpoint } = await cloud.create();
  const nodes = await Promise.all(
    cloud.running().map((instance) => bootNode(box, cloud, ca, instance, teeFor(ca, good, cloud.signingKind))),
  );
  await box.startLoadBalancer(clusterEndpoint);
  await Promise.all(nodes.map((node) => box.waitForLog(node, 'bootstrapper started')));
  const init = await initCluster({
    workspaceDir: workspace,
    log: createLogger(() => undefined),
    validatorDeps: { ...(await cloud.validatorDeps()), amdRoots: ca.roots },
    // The provider pointed at the fake (the workspace's own would reach the real cloud) stops publishing the hash.
    markInitialized: () =>
      cloud.infrastructure.markInitialized?.({
        journal: clusterJournalView(new FileResourceJournal(workspace)),
        log: { debug: () => undefined, info: () => undefined, warn: () => undefined },
        workspaceDir: workspace,
      }) ?? Promise.resolve(),
  });
  return { init, good, elapsedMs: Date.now() - started };
}

/** `verify --all` through the production orchestration (cli/cluster/verify.ts), trusting the test ARK. */
export async function verifyAll(cloud: BoxCloud, ca: SnpTestCa, workspace: string): Promise<VerifyResult> {
  const validatorDeps = { ...(await cloud.validatorDeps()), amdRoots: ca.roots };
  return withWorkspaceSession(workspace, 'verify', ({ workspaceDir, journal, log }) =>
    verifyCluster({
      workspaceDir,
      log,
      all: true,
      provider: cloud.infrastructure,
      journal,
      validatorDeps,
      timeoutMs: 20_000,
    }),
  );
}
