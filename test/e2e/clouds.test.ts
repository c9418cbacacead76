/**
 * Cloud in a box (`npm run e2e:clouds`): per cloud, `create` runs against that cloud's fake, and every instance the
 * fake launches boots as a real node (./cloud-box/: our node program in its own process on the instance's loopback
 * address, swtpm as its vTPM, the cloud's metadata service from the fake, SEV-SNP reports signed by a test
 * ARK → ASK/ASVK → VCEK/VLEK chain that only the test trusts). Then `init` and every join run that cloud's production
 * code paths: the node platform, its issuer, the join service with the variant's validator, the LUKS2 state disk
 * (cryptsetup, without device-mapper). Kubernetes: the `none` backend with its etcd cluster store, because a kubeadm
 * node's store is the Kubernetes API and nothing here runs an API server (see the box's node program). Must show: create → init → every
 * node joined → status and `verify --all` OK → terminate leaves the fake empty; and a node whose report is signed outside the trusted
 * chain, or does not bind its AK, is refused and gets nothing (its state disk is never formatted).
 * Each cloud prints one line: its variant, the outcome and the create + init wall time (the fakes add no latency).
 * `npm run bench -- cloud-box` measures the same create + init beside the local provider's `mini up`.
 *
 * Then per cloud a 3 + 2 cluster through `upgrade apply` (the join service probed through the load balancer every
 * 100 ms, no failed probe) and `apply` scaling 3 → 5 → 3 control planes and 2 → 4 → 1 workers (exactly the newest
 * removed, etcd 3/3), while the fake returns the errors its cloud returns at times; each phase asserts that every kind
 * the scenario claims was returned at least once, and prints the counts. The clouds run at the same time, each
 * cloud's two clusters one after the other (./cloud-box/concurrent.ts). `-g` selects what is reported, not what runs.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { generateKeyPair, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { newestFirst } from '../../cli/cluster/newest-first.js';
import type { VariantName } from '../../lib/attestation/variant-table.js';
import { loadConfig } from '../../lib/config/index.js';
import { pollUntil } from '../../lib/poll.js';
import { makeEndorsementKey, makeSnpTestCa, type SnpTestCa } from '../attestation/snp/fixtures.js';
import { hasSwtpm } from '../atls/support/kits.js';
import { formatInjected, type InjectedCounts } from '../fakes/injected.js';
import { requireTool } from '../support/require-tool.js';
import {
  applyCounts,
  listRunning,
  NEW_IMAGE,
  probeJoinService,
  publishImages,
  storeHealth,
  upAwsCluster,
  upgradeToNewImage,
  type AwsBoxCluster,
  type BoxCluster,
} from './cloud-box/aws-scenarios.js';
import type { CloudBox } from './cloud-box/box.js';
import { AZ_NEW_IMAGE, BOX_CLOUDS, GCP_NEW_IMAGE, type BoxCloud, type NodeStatusJson } from './cloud-box/clouds.js';
import { ConcurrentScenarios, type ScenarioFixture } from './cloud-box/concurrent.js';
import {
  upAzureCluster,
  upGcpCluster,
  type AzureBoxCluster,
  type GcpBoxCluster,
} from './cloud-box/gcp-azure-scenarios.js';
import { bootNode, teeFor, upCluster, verifyAll } from './cloud-box/scenario.js';

const hasCryptsetup = spawnSync('cryptsetup', ['--version'], { stdio: 'ignore' }).status === 0;
// Asynchronous: the other clusters' probes and load balancers run on this process's event loop meanwhile.
const isLuks = (file: string) =>
  promisify(execFile)('cryptsetup', ['isLuks', file]).then(
    () => true,
    () => false,
  );

async function waitForStatus(
  cloud: BoxCloud,
  done: (s: NodeStatusJson) => boolean,
  timeoutMs = 90_000,
): Promise<NodeStatusJson> {
  let last: NodeStatusJson | undefined;
  return pollUntil(
    async () => {
      last = await cloud.status();
      return done(last) ? last : undefined;
    },
    { timeoutMs, intervalMs: 500, onTimeout: () => assert.fail(`status did not settle: ${JSON.stringify(last)}`) },
  );
}

/** An error kind a fake claims to inject in a phase: its name in messages, and the counted kinds it covers. */
interface Claim {
  name: string;
  kinds: RegExp;
}

/**
 * Asserts that the fake returned every claimed kind at least once in the phase (`counts`: what it returned then), and
 * says what it returned: "gcp upgrade apply: 429 rateLimitExceeded ×2, 503 ×3, PROVISIONING ×41".
 */
function assertInjected(label: string, counts: InjectedCounts, claims: Claim[]): string {
  for (const claim of claims) {
    const hits = Object.entries(counts).filter(([kind]) => claim.kinds.test(kind));
    assert.ok(
      hits.length > 0,
      `${label}: the fake never returned ${claim.name}, which the scenario claims to ride out (it returned: ${formatInjected(counts)})`,
    );
  }
  return `${label}: ${formatInjected(counts)}`;
}

const NOT_FOUND: Claim = { name: 'EC2 *.NotFound (eventual consistency)', kinds: /\.NotFound$/ };
const NOT_READY: Claim = { name: 'resourceNotReady', kinds: /^resourceNotReady$/ };
const PROVISIONING: Claim = { name: 'an instance still PROVISIONING', kinds: /^PROVISIONING$/ };
const GCP_429: Claim = { name: '429 rateLimitExceeded', kinds: /^429 / };
const GCP_503: Claim = { name: '503', kinds: /^503\b/ };
const AZ_429: Claim = { name: '429 TooManyRequests', kinds: /^429 / };
const CREATING: Claim = { name: 'a VM Creating until its node reported Ready', kinds: /^Creating until Ready$/ };

/**
 * Per cloud, one 3 + 2 cluster carried through `upgrade apply` and `apply` scaling both ways (one cluster per cloud keeps
 * the suite short), while its fake answers the way the cloud does at times (./cloud-box/aws-scenarios.ts,
 * ./cloud-box/gcp-azure-scenarios.ts). `injects` names, per phase, what the fake returns then; each is asserted.
 */
interface UpgradeCloud {
  name: 'aws' | 'gcp' | 'azure';
  variant: VariantName;
  newImage: string;
  up: (o: {
    workspace: string;
    box: CloudBox;
    ca: SnpTestCa;
    octet: number;
    controlPlanes: number;
    workers: number;
  }) => Promise<BoxCluster>;
  /** Throttling the cloud documents, on the calls the next phase makes (each provider rides it out). */
  throttle(c: BoxCluster): void;
  injects: { create: Claim[]; upgrade: Claim[]; scale: Claim[] };
  /** What the cloud checks beyond the common ones after the rollout. */
  afterUpgrade?(c: BoxCluster): void;
  /** The instance ids the provider removed one by one, lower case. */
  removed(c: BoxCluster): string[];
  /** How many requests the fake logged so far. */
  requestCount(c: BoxCluster): number;
  /** Whether a request after the first `since` changed a group's size downwards or left the choice of a victim to the cloud. */
  letCloudChooseSince(c: BoxCluster, since: number): boolean;
}

const aws = (c: BoxCluster) => (c as AwsBoxCluster).cloud.fake;
const gcp = (c: BoxCluster) => (c as GcpBoxCluster).cloud.fake;
const azure = (c: BoxCluster) => (c as AzureBoxCluster).cloud.fake;

const UPGRADE_CLOUDS: UpgradeCloud[] = [
  {
    name: 'aws',
    variant: 'aws-sev-snp',
    newImage: NEW_IMAGE,
    up: (o) => upAwsCluster({ ...o, consistencyMs: 300, drainMs: 300 }),
    throttle: () => undefined,
    injects: { create: [NOT_FOUND], upgrade: [NOT_FOUND], scale: [NOT_FOUND] },
    afterUpgrade(c) {
      assert.ok(
        aws(c).calls('DeregisterTargets').length >= 15,
        'aws: every old control plane drained from the five target groups',
      );
    },
    removed: (c) =>
      aws(c)
        .calls('TerminateInstanceInAutoScalingGroup')
        .map((t) => String(t.params.InstanceId).toLowerCase()),
    requestCount: (c) => aws(c).requests.length,
    // The group's own termination policy would pick by launch template and zone, not by age
    // (test/fakes/aws/autoscaling.ts): a lower desired capacity, or a termination that does not decrement it.
    letCloudChooseSince: (c, since) =>
      aws(c)
        .requests.slice(since)
        .some(
          (r) =>
            r.action === 'SetDesiredCapacity' ||
            (r.action === 'UpdateAutoScalingGroup' && r.params.DesiredCapacity !== undefined) ||
            (r.action === 'TerminateInstanceInAutoScalingGroup' && r.params.ShouldDecrementDesiredCapacity !== 'true'),
        ),
  },
  {
    name: 'gcp',
    variant: 'gcp-sev-snp',
    newImage: GCP_NEW_IMAGE,
    up: upGcpCluster,
    throttle(c) {
      // createInstances adds the rollout's nodes, resize grows the groups for apply.
      gcp(c).inject({
        match: /\/(createInstances|resize)\b/,
        status: 429,
        reason: 'rateLimitExceeded',
        message: 'Rate Limit Exceeded',
        times: 2,
      });
      gcp(c).inject({ match: /listManagedInstances/, status: 503, message: 'backend unavailable', times: 3 });
    },
    injects: {
      create: [NOT_READY],
      upgrade: [GCP_429, GCP_503, PROVISIONING],
      scale: [GCP_429, GCP_503, PROVISIONING],
    },
    removed: (c) =>
      [
        ...gcp(c)
          .calls(/\/deleteInstances$/)
          .flatMap((call) => (call.body as { instances: string[] }).instances),
        ...gcp(c)
          .calls(/^DELETE .*\/instances\/[^/]+$/)
          .map((call) => call.path),
      ].map((u) => u.slice(u.indexOf('projects/')).toLowerCase()),
    requestCount: (c) => gcp(c).requests.length,
    letCloudChooseSince: (c, since) =>
      gcp(c)
        .requests.slice(since)
        .some((r) => /\/resize$/.test(r.path)),
  },
  {
    name: 'azure',
    variant: 'azure-sev-snp',
    newImage: AZ_NEW_IMAGE,
    up: upAzureCluster,
    throttle(c) {
      azure(c).inject({
        method: 'PATCH',
        path: /virtualMachineScaleSets\/[^/]+$/,
        status: 429,
        code: 'TooManyRequests',
        headers: { 'Retry-After': '1' },
        times: 2,
      });
    },
    injects: { create: [], upgrade: [AZ_429, CREATING], scale: [AZ_429, CREATING] },
    removed: (c) =>
      azure(c)
        .requests.filter((r) => r.method === 'DELETE' && /\/virtualMachines\/[^/]+$/.test(r.path))
        .map((r) => r.path.toLowerCase()),
    requestCount: (c) => azure(c).requests.length,
    letCloudChooseSince: (c, since) =>
      azure(c)
        .requests.slice(since)
        .some((r) => r.method === 'PATCH' && (r.body as { sku?: unknown } | undefined)?.sku !== undefined),
  },
];

/** create → init → every node joined → status, verify --all → forged nodes refused → terminate, on one cloud. */
async function createAndRefuseForged(
  { name, make }: (typeof BOX_CLOUDS)[number],
  ca: SnpTestCa,
  { workspace, box, octet, trackCloud, log }: ScenarioFixture,
): Promise<void> {
  const c = trackCloud(await make(workspace, octet));
  const { init, good, elapsedMs } = await upCluster(c, box, ca, workspace, name);
  assert.equal(init.kubernetesBackend, 'none');

  const joined = await waitForStatus(c, (s) => s.nodes.length === 3 && s.nodes.every((n) => n.state === 'joined'));
  assert.deepEqual(joined.nodes.map((n) => n.role).sort(), ['control-plane', 'worker', 'worker'], `${name}: roles`);
  for (const node of box.booted)
    assert.ok(await isLuks(node.stateDisk), `${name}: ${node.instance.id}: state disk formatted with LUKS2`);
  const verified = await verifyAll(c, ca, workspace);
  assert.deepEqual(
    verified.nodes.map((n) => [n.outcome, n.reason]),
    [
      ['verified', undefined],
      ['verified', undefined],
      ['verified', undefined],
    ],
    `${name}: verify --all`,
  );
  assert.equal(verified.clusterId, init.clusterId);

  // Two more workers whose evidence must not pass: one report signed by a key outside the trusted chain (its
  // certificate names the test ASK/ASVK, a foreign key signed it), one whose REPORT_DATA does not bind the AK.
  const foreign = makeEndorsementKey(ca, {
    kind: c.signingKind,
    issuerKey: (await promisify(generateKeyPair)('rsa', { modulusLength: 2048 })).privateKey,
  });
  const forged = [
    { what: 'signed outside the trusted chain', tee: teeFor(ca, foreign, c.signingKind) },
    {
      what: 'REPORT_DATA not binding the AK',
      tee: teeFor(ca, good, c.signingKind, { reportDataHex: randomBytes(64).toString('hex') }),
    },
  ];
  const extra = await c.addWorkers(forged.length);
  const forgedNodes = await Promise.all(
    extra.map(async (instance, i) => ({
      ...forged[i],
      node: await bootNode(box, c, ca, instance, forged[i].tee),
    })),
  );
  const refused = await waitForStatus(c, (s) => s.nodes.filter((n) => n.state === 'refused').length === 2);
  const reasons = refused.nodes.filter((n) => n.state === 'refused').map((n) => n.reason ?? '');
  assert.ok(
    reasons.some((r) => /not signed by the ASK/.test(r)),
    `${name}: ${reasons.join(' | ')}`,
  );
  assert.ok(
    reasons.some((r) => /REPORT_DATA does not bind/.test(r)),
    `${name}: ${reasons.join(' | ')}`,
  );
  assert.equal(refused.nodes.filter((n) => n.state === 'joined').length, 3);
  for (const f of forgedNodes) {
    assert.equal(await isLuks(f.node.stateDisk), false, `${name}: ${f.what}: got no disk key, formatted nothing`);
    assert.doesNotMatch(f.node.output(), /"msg":"state disk formatted"/);
  }

  await c.terminate();
  assert.deepEqual(c.leftovers(), [], `${name}: what the fake still holds after terminate`);
  assert.deepEqual(c.running(), [], `${name}: instances still running after terminate`);
  await box.close();
  log(
    `${c.variant}: create → init → 3/3 joined → status OK → verify --all 3/3 → 2 forged nodes refused → terminate: fake empty (create + init ${(elapsedMs / 1000).toFixed(1)} s)`,
  );
}

/**
 * On one cloud: a 3 + 2 cluster; `upgrade apply` to a new image with the join service probed through the load
 * balancer every 100 ms; `apply` to 5 + 4 and back to 3 + 1, removing exactly the newest; etcd 3/3; and in each
 * phase, every kind of error the fake claims to inject was returned.
 */
async function upgradeAndScale(
  cloud: UpgradeCloud,
  ca: SnpTestCa,
  { workspace, box, octet, track, log }: ScenarioFixture,
): Promise<void> {
  const { name } = cloud;
  const started = Date.now();
  const c = track(await cloud.up({ workspace, box, ca, octet, controlPlanes: 3, workers: 2 }));
  const injected = c.cloud.injected;
  await waitForStatus(c.cloud, (s) => s.nodes.length === 5 && s.nodes.every((n) => n.state === 'joined'), 240_000);
  const upMs = Date.now() - started;
  const atUp = injected.snapshot();
  const reports = [assertInjected(`${name} create + init`, atUp, cloud.injects.create)];
  const oldImage = (await loadConfig(workspace)).image;
  const { index } = await publishImages(workspace, oldImage, { variant: cloud.variant, image: cloud.newImage });

  cloud.throttle(c);
  const probe = probeJoinService(c.clusterEndpoint);
  const upgradeStarted = Date.now();
  const upgrade = await upgradeToNewImage(c, ca, workspace, index, cloud.newImage).finally(() => probe.stop());
  const rolloutMs = Date.now() - upgradeStarted;
  const { probes, failures } = probe.stop();
  assert.equal(upgrade.replaced.length, 5, `${name}: nodes replaced by the rollout`);
  assert.deepEqual(failures, [], `${name}: ${failures.length} of ${probes} join-service probes failed`);
  const upgraded = await listRunning(c, workspace);
  assert.deepEqual(
    upgraded.map((i) => i.image),
    Array(5).fill(cloud.newImage),
    `${name}: the running instances' images after the rollout`,
  );
  cloud.afterUpgrade?.(c);
  const atUpgrade = injected.snapshot();
  reports.push(assertInjected(`${name} upgrade apply`, injected.since(atUp), cloud.injects.upgrade));

  cloud.throttle(c);
  const scaleStarted = Date.now();
  assert.deepEqual(
    await applyCounts(c, workspace, 5, 4),
    { control_plane_default: [3, 5], worker_default: [2, 4] },
    `${name}: apply 5 + 4`,
  );
  await pollUntil(async () => ((await storeHealth(c, workspace)).members.length === 5 ? true : undefined), {
    timeoutMs: 60_000,
    intervalMs: 500,
    what: `${name}: the two new control planes as etcd members`,
  });
  // EC2 lists a new instance only a while after it launched (the fake plays that): wait until the provider lists all nine.
  const nine = await pollUntil(
    async () => {
      const running = await listRunning(c, workspace);
      return running.length === 9 ? running : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 500, what: `${name}: nine running instances` },
  );
  const newest = [
    ...newestFirst(nine.filter((i) => i.role === 'control-plane')).slice(0, 2),
    ...newestFirst(nine.filter((i) => i.role === 'worker')).slice(0, 3),
  ].map((i) => i.id.toLowerCase());
  const removedBefore = cloud.removed(c).length;
  const requestsBefore = cloud.requestCount(c);
  assert.deepEqual(
    await applyCounts(c, workspace, 3, 1),
    { control_plane_default: [5, 3], worker_default: [4, 1] },
    `${name}: apply 3 + 1`,
  );
  assert.deepEqual(cloud.removed(c).slice(removedBefore).sort(), [...newest].sort(), `${name}: removed the newest`);
  assert.equal(
    cloud.letCloudChooseSince(c, requestsBefore),
    false,
    `${name}: scale-in changed no group size for the cloud to choose a victim`,
  );
  const survivors = (await listRunning(c, workspace)).map((i) => i.id.toLowerCase()).sort();
  assert.deepEqual(
    survivors,
    nine
      .map((i) => i.id.toLowerCase())
      .filter((id) => !newest.includes(id))
      .sort(),
    `${name}: exactly the instances apply kept still run`,
  );
  const health = await storeHealth(c, workspace);
  assert.deepEqual([health.members.length, health.healthyVoters, health.quorum], [3, 3, true], `${name}: etcd`);
  const final = await waitForStatus(
    c.cloud,
    (s) => s.nodes.length === 4 && s.nodes.every((n) => n.state === 'joined'),
    60_000,
  );
  assert.deepEqual(
    final.nodes.map((n) => n.role).sort(),
    ['control-plane', 'control-plane', 'control-plane', 'worker'],
    `${name}: roles at the end`,
  );
  reports.push(assertInjected(`${name} apply`, injected.since(atUpgrade), cloud.injects.scale));
  log(
    `${name}: up 3 + 2 in ${(upMs / 1000).toFixed(1)} s; upgrade in ${(rolloutMs / 1000).toFixed(1)} s (${probes} join probes through the LB, 0 failed); ` +
      `control planes 3 → 5 → 3 and workers 2 → 4 → 1, the newest removed, in ${((Date.now() - scaleStarted) / 1000).toFixed(1)} s; etcd 3/3`,
  );
  log(`${name}: the fake returned, and the providers rode out: ${reports.join('; ')}`);
}

describe('cloud in a box', function () {
  this.timeout(900_000);
  let ca: SnpTestCa;
  // The clouds at once, each cloud's two clusters one after the other, each on its own fake and addresses
  // (./cloud-box/concurrent.ts); each `it` awaits its own scenario.
  const scenarios = new ConcurrentScenarios();
  for (const cloud of BOX_CLOUDS)
    scenarios.add(cloud.name, `${cloud.name} create`, (f) => createAndRefuseForged(cloud, ca, f));
  for (const cloud of UPGRADE_CLOUDS)
    scenarios.add(cloud.name, `${cloud.name} upgrade`, (f) => upgradeAndScale(cloud, ca, f));
  before(function () {
    requireTool(this, hasSwtpm(), 'swtpm');
    requireTool(this, hasCryptsetup, 'cryptsetup');
    ca = makeSnpTestCa('Milan');
    scenarios.start();
  });
  after(() => scenarios.closeAll());

  const report = async (scenario: string) => {
    for (const line of await scenarios.outcome(scenario)) console.log(`      ${line}`);
  };
  for (const { name } of BOX_CLOUDS) {
    describe(name, () => {
      it('create → init → every node joined → status and verify --all OK; forged nodes are refused and get nothing; terminate leaves the fake empty', () =>
        report(`${name} create`));
      it('upgrade apply of 3 + 2 to a new image with the join service probed through the LB every 100 ms and no failed probe; apply scales control planes 3 → 5 → 3 and workers 2 → 4 → 1 removing exactly the newest; etcd 3/3; every error kind the fake claims to inject was returned in each phase', () =>
        report(`${name} upgrade`));
    });
  }
});
