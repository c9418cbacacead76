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
 */
import assert from 'node:assert/strict';
import { newestFirst } from '../../cli/cluster/newest-first.js';
import { pollUntil } from '../../lib/poll.js';
import { requireTool } from '../support/require-tool.js';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeEndorsementKey, makeSnpTestCa, type SnpTestCa } from '../attestation/snp/fixtures.js';
import { hasSwtpm } from '../atls/support/kits.js';
import { CloudBox } from './cloud-box/box.js';
import { BOX_CLOUDS, type BoxCloud, type NodeStatusJson } from './cloud-box/clouds.js';
import { bootNode, teeFor, upCluster, verifyAll } from './cloud-box/scenario.js';
import {
  applyCounts,
  listRunning,
  NEW_IMAGE,
  probeJoinService,
  publishImages,
  storeHealth,
  upAwsCluster,
  upgradeToNewImage,
  type BoxCluster,
} from './cloud-box/aws-scenarios.js';
import { AZ_NEW_IMAGE, GCP_NEW_IMAGE } from './cloud-box/clouds.js';
import {
  upAzureCluster,
  upGcpCluster,
  type AzureBoxCluster,
  type GcpBoxCluster,
} from './cloud-box/gcp-azure-scenarios.js';
import { loadConfig } from '../../lib/config/index.js';

const hasCryptsetup = spawnSync('cryptsetup', ['--version'], { stdio: 'ignore' }).status === 0;
const isLuks = (file: string) => spawnSync('cryptsetup', ['isLuks', file]).status === 0;

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

/**
 * A box in a temporary folder for one describe's cluster: made before its tests; afterwards the cluster the test
 * tracked, the box, the cloud's fake and the folder are gone, whatever the test left.
 */
function boxFixture(prefix: string): { root: string; box: CloudBox; track<C extends BoxCluster>(cluster: C): C } {
  let cluster: BoxCluster | undefined;
  const fixture = {
    root: '',
    box: undefined as unknown as CloudBox,
    track<C extends BoxCluster>(made: C): C {
      cluster = made;
      return made;
    },
  };
  before(async () => {
    fixture.root = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    fixture.box = new CloudBox(path.join(fixture.root, 'vms'));
  });
  after(async () => {
    await cluster?.close();
    await fixture.box?.close();
    await cluster?.cloud.close();
    if (fixture.root) await fs.rm(fixture.root, { recursive: true, force: true });
  });
  return fixture;
}

describe('cloud in a box', function () {
  this.timeout(300_000);
  let ca: SnpTestCa;
  before(function () {
    requireTool(this, hasSwtpm(), 'swtpm');
    requireTool(this, hasCryptsetup, 'cryptsetup');
    ca = makeSnpTestCa('Milan');
  });

  for (const { name, make } of BOX_CLOUDS) {
    describe(name, () => {
      let root: string;
      let workspace: string;
      let cloud: BoxCloud | undefined;
      let box: CloudBox;
      before(async () => {
        root = await fs.mkdtemp(path.join(os.tmpdir(), `box-${name}-`));
        workspace = path.join(root, 'workspace');
        box = new CloudBox(path.join(root, 'vms'));
      });
      after(async () => {
        await box?.close();
        await cloud?.close();
        if (root) await fs.rm(root, { recursive: true, force: true });
      });

      it('create → init → every node joined → status and verify --all OK; forged nodes are refused and get nothing; terminate leaves the fake empty', async () => {
        const c = (cloud = await make(workspace, randomInt(20, 240)));
        const { init, good, elapsedMs } = await upCluster(c, box, ca, workspace, name);
        assert.equal(init.kubernetesBackend, 'none');

        const joined = await waitForStatus(
          c,
          (s) => s.nodes.length === 3 && s.nodes.every((n) => n.state === 'joined'),
        );
        assert.deepEqual(joined.nodes.map((n) => n.role).sort(), ['control-plane', 'worker', 'worker']);
        for (const node of box.booted)
          assert.ok(isLuks(node.stateDisk), `${node.instance.id}: state disk formatted with LUKS2`);
        const verified = await verifyAll(c, ca, workspace);
        assert.deepEqual(
          verified.nodes.map((n) => [n.outcome, n.reason]),
          [
            ['verified', undefined],
            ['verified', undefined],
            ['verified', undefined],
          ],
        );
        assert.equal(verified.clusterId, init.clusterId);

        // Two more workers whose evidence must not pass: one report signed by a key outside the trusted chain (its
        // certificate names the test ASK/ASVK, a foreign key signed it), one whose REPORT_DATA does not bind the AK.
        const foreign = makeEndorsementKey(ca, {
          kind: c.signingKind,
          issuerKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
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
          reasons.join(' | '),
        );
        assert.ok(
          reasons.some((r) => /REPORT_DATA does not bind/.test(r)),
          reasons.join(' | '),
        );
        assert.equal(refused.nodes.filter((n) => n.state === 'joined').length, 3);
        for (const f of forgedNodes) {
          assert.equal(isLuks(f.node.stateDisk), false, `${f.what}: got no disk key, formatted nothing`);
          assert.doesNotMatch(f.node.output(), /"msg":"state disk formatted"/);
        }

        await c.terminate();
        assert.deepEqual(c.leftovers(), []);
        assert.deepEqual(c.running(), []);
        await box.close();
        console.log(
          `      ${c.variant}: create → init → 3/3 joined → status OK → verify --all 3/3 → 2 forged nodes refused → terminate: fake empty (create + init ${(elapsedMs / 1000).toFixed(1)} s)`,
        );
      });
    });
  }

  describe('aws: scaling', function () {
    this.timeout(900_000);
    const fixture = boxFixture('box-aws-ops-');

    it("apply scales workers 2 → 4 → 1: new instances boot and join, scale-in terminates exactly the newest (not the group's choice); the join service answers through the LB every 100 ms; EC2 NotFound injected throughout", async () => {
      const workspace = path.join(fixture.root, 'workspace');
      const c = fixture.track(
        await upAwsCluster({
          workspace,
          box: fixture.box,
          ca,
          octet: randomInt(20, 240),
          consistencyMs: 300,
          drainMs: 300,
        }),
      );
      const fake = c.cloud.fake;
      await waitForStatus(c.cloud, (s) => s.nodes.length === 3 && s.nodes.every((n) => n.state === 'joined'), 180_000);
      const probe = probeJoinService(c.clusterEndpoint);
      try {
        assert.deepEqual(await applyCounts(c, workspace, 1, 4), { worker_default: [2, 4] });
        // EC2 lists a new instance as pending for a while after it joined (the fake plays that): wait for running.
        const four = await pollUntil(
          async () => {
            const workers = (await listRunning(c, workspace)).filter((i) => i.role === 'worker');
            return workers.length === 4 ? workers : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 500, what: 'four running workers' },
        );
        const group = [...fake.state.autoScalingGroups.values()].find((g) => g.name.includes('worker'))!;
        const newest = newestFirst(four)
          .slice(0, 3)
          .map((i) => i.id)
          .sort();
        const kept = four.map((i) => i.id).filter((id) => !newest.includes(id));

        assert.deepEqual(await applyCounts(c, workspace, 1, 1), { worker_default: [4, 1] });
        const { probes, failures } = probe.stop();
        const terminations = fake.calls('TerminateInstanceInAutoScalingGroup');
        assert.deepEqual(terminations.map((t) => t.params.InstanceId as string).sort(), newest);
        assert.ok(terminations.every((t) => t.params.ShouldDecrementDesiredCapacity === 'true'));
        // The group's own termination policy would pick by launch template and zone, not by age (the fake plays it,
        // test/fakes/aws/autoscaling.ts): what survives is the one apply kept.
        const survivors = [...fake.state.instances.values()]
          .filter((i) => i.groupName === group.name && i.terminatedAt === undefined)
          .map((i) => i.id);
        assert.deepEqual(survivors, kept);
        assert.ok(
          fake.requests.some((r) => /NotFound$/.test(r.error ?? '')),
          'the fake answered NotFound while things were fresh',
        );
        assert.deepEqual(failures, [], `${failures.length} of ${probes} join-service probes failed`);
        const final = await waitForStatus(
          c.cloud,
          (s) => s.nodes.length === 2 && s.nodes.every((n) => n.state === 'joined'),
          60_000,
        );
        assert.deepEqual(final.nodes.map((n) => n.role).sort(), ['control-plane', 'worker']);
        const health = await storeHealth(c, workspace);
        assert.deepEqual([health.members.length, health.healthyVoters, health.quorum], [1, 1, true]);
        console.log(
          `      aws: workers 2 → 4 → 1, the newest 3 terminated by apply's choice; ${probes} join probes through the LB, 0 failed; etcd 1/1`,
        );
      } finally {
        probe.stop();
      }
    });
  });

  describe('aws: upgrade and control-plane scaling', function () {
    this.timeout(900_000);
    const fixture = boxFixture('box-aws-up-');

    it('upgrade apply of 3 + 2 to a new image with the join service probed through the LB every 100 ms and no failed probe; then control planes 3 → 5 → 3 with exactly the chosen ones gone; etcd 3/3; EC2 NotFound injected', async () => {
      const workspace = path.join(fixture.root, 'workspace');
      const c = fixture.track(
        await upAwsCluster({
          workspace,
          box: fixture.box,
          ca,
          octet: randomInt(20, 240),
          consistencyMs: 300,
          drainMs: 300,
          controlPlanes: 3,
          workers: 2,
        }),
      );
      const fake = c.cloud.fake;
      await waitForStatus(c.cloud, (s) => s.nodes.length === 5 && s.nodes.every((n) => n.state === 'joined'), 240_000);
      const oldImage = [...fake.state.instances.values()][0]!.imageId;
      const { index } = await publishImages(workspace, oldImage);

      const probe = probeJoinService(c.clusterEndpoint);
      const started = Date.now();
      const upgrade = await upgradeToNewImage(c, ca, workspace, index).finally(() => probe.stop());
      const rolloutMs = Date.now() - started;
      const { probes, failures } = probe.stop();
      assert.equal(upgrade.replaced.length, 5);
      assert.deepEqual(failures, [], `${failures.length} of ${probes} join-service probes failed`);
      const running = [...fake.state.instances.values()].filter((i) => fake.state.instanceState(i) === 'running');
      assert.deepEqual(
        running.map((i) => i.imageId),
        Array(5).fill(NEW_IMAGE),
      );
      assert.ok(
        fake.calls('DeregisterTargets').length >= 15,
        'every old control plane drained from the five target groups',
      );
      assert.ok(
        fake.requests.some((r) => /NotFound$/.test(r.error ?? '')),
        'the fake answered NotFound while things were fresh',
      );

      const before = fake.calls('TerminateInstanceInAutoScalingGroup').length;
      assert.deepEqual(await applyCounts(c, workspace, 5, 2), { control_plane_default: [3, 5] });
      // A joined control plane's etcd member is added as it starts its store; wait for the fifth (bounded).
      for (let i = 0; (await storeHealth(c, workspace)).members.length < 5; i++) {
        assert.ok(i < 120, 'the two new control planes became etcd members');
        await new Promise((r) => setTimeout(r, 500));
      }
      const five = (await listRunning(c, workspace)).filter((i) => i.role === 'control-plane');
      const newest = newestFirst(five)
        .slice(0, 2)
        .map((i) => i.id)
        .sort();
      assert.deepEqual(await applyCounts(c, workspace, 3, 2), { control_plane_default: [5, 3] });
      const terminations = fake.calls('TerminateInstanceInAutoScalingGroup').slice(before);
      assert.deepEqual(terminations.map((t) => t.params.InstanceId as string).sort(), newest);
      const health = await storeHealth(c, workspace);
      assert.deepEqual([health.members.length, health.healthyVoters, health.quorum], [3, 3, true]);
      console.log(
        `      aws: upgrade 3 + 2 in ${(rolloutMs / 1000).toFixed(1)} s (${probes} join probes through the LB, 0 failed); control planes 3 → 5 → 3, the 2 newest removed; etcd 3/3`,
      );
    });
  });
  /**
   * GCP and Azure: one cluster each, 3 + 2, carried through an upgrade and both kinds of scaling (one cluster instead of
   * AWS's two keeps the suite short). What the fakes do meanwhile: see ./cloud-box/gcp-azure-scenarios.ts.
   */
  const SCALING_CLOUDS: {
    name: 'gcp' | 'azure';
    variant: 'gcp-sev-snp' | 'azure-sev-snp';
    newImage: string;
    up: (o: Parameters<typeof upGcpCluster>[0]) => Promise<GcpBoxCluster | AzureBoxCluster>;
    /** Throttling the cloud documents, on the calls a rollout makes (each provider rides it out). */
    throttle(c: BoxCluster): void;
    /** Whether the fake saw a throttled call and the cloud's eventual consistency (a new node not yet ready). */
    sawEventualConsistency(c: BoxCluster): boolean;
    /** The instance ids the provider removed one by one, lower case. */
    removed(c: BoxCluster): string[];
    /** How many requests the fake logged so far. */
    requestCount(c: BoxCluster): number;
    /** Whether a request after the first `since` changed a group's size (resize, capacity) and so let the cloud choose a victim. */
    sizeChangedSince(c: BoxCluster, since: number): boolean;
  }[] = [
    {
      name: 'gcp',
      variant: 'gcp-sev-snp',
      newImage: GCP_NEW_IMAGE,
      up: upGcpCluster,
      throttle(c) {
        const { fake } = (c as GcpBoxCluster).cloud;
        fake.inject({
          match: /createInstances/,
          status: 429,
          reason: 'rateLimitExceeded',
          message: 'Rate Limit Exceeded',
          times: 2,
        });
        fake.inject({ match: /listManagedInstances/, status: 503, message: 'backend unavailable', times: 3 });
      },
      sawEventualConsistency: (c) => (c as GcpBoxCluster).cloud.fake.compute.instanceBootMs > 0,
      removed: (c) => {
        const { fake } = (c as GcpBoxCluster).cloud;
        return [
          ...fake.calls(/\/deleteInstances$/).flatMap((call) => (call.body as { instances: string[] }).instances),
          ...fake.calls(/^DELETE .*\/instances\/[^/]+$/).map((call) => call.path),
        ].map((u) => u.slice(u.indexOf('projects/')).toLowerCase());
      },
      requestCount: (c) => (c as GcpBoxCluster).cloud.fake.requests.length,
      sizeChangedSince: (c, since) =>
        (c as GcpBoxCluster).cloud.fake.requests.slice(since).some((r) => /\/resize$/.test(r.path)),
    },
    {
      name: 'azure',
      variant: 'azure-sev-snp',
      newImage: AZ_NEW_IMAGE,
      up: upAzureCluster,
      throttle(c) {
        const { fake } = (c as AzureBoxCluster).cloud;
        fake.inject({
          method: 'PATCH',
          path: /virtualMachineScaleSets\/[^/]+$/,
          status: 429,
          code: 'TooManyRequests',
          headers: { 'Retry-After': '1' },
          times: 2,
        });
      },
      sawEventualConsistency: (c) => (c as AzureBoxCluster).cloud.fake.vmReady === 'wire-server',
      removed: (c) =>
        (c as AzureBoxCluster).cloud.fake.requests
          .filter((r) => r.method === 'DELETE' && /\/virtualMachines\/[^/]+$/.test(r.path))
          .map((r) => r.path.toLowerCase()),
      requestCount: (c) => (c as AzureBoxCluster).cloud.fake.requests.length,
      sizeChangedSince: (c, since) =>
        (c as AzureBoxCluster).cloud.fake.requests
          .slice(since)
          .some((r) => r.method === 'PATCH' && (r.body as { sku?: unknown } | undefined)?.sku !== undefined),
    },
  ];

  for (const cloud of SCALING_CLOUDS) {
    describe(`${cloud.name}: upgrade and scaling`, function () {
      this.timeout(900_000);
      const fixture = boxFixture(`box-${cloud.name}-up-`);

      it('upgrade apply of 3 + 2 to a new image with the join service probed through the LB every 100 ms and no failed probe; apply scales control planes 3 → 5 → 3 and workers 2 → 4 → 1 removing exactly the newest; etcd 3/3; throttling injected', async () => {
        const workspace = path.join(fixture.root, 'workspace');
        const started = Date.now();
        const c = fixture.track(
          await cloud.up({
            workspace,
            box: fixture.box,
            ca,
            octet: randomInt(20, 240),
            controlPlanes: 3,
            workers: 2,
          }),
        );
        await waitForStatus(
          c.cloud,
          (s) => s.nodes.length === 5 && s.nodes.every((n) => n.state === 'joined'),
          240_000,
        );
        const upMs = Date.now() - started;
        const oldImage = (await loadConfig(workspace)).image;
        const { index } = await publishImages(workspace, oldImage, { variant: cloud.variant, image: cloud.newImage });

        cloud.throttle(c);
        const probe = probeJoinService(c.clusterEndpoint);
        const upgradeStarted = Date.now();
        const upgrade = await upgradeToNewImage(c, ca, workspace, index, cloud.newImage).finally(() => probe.stop());
        const rolloutMs = Date.now() - upgradeStarted;
        const { probes, failures } = probe.stop();
        assert.equal(upgrade.replaced.length, 5);
        assert.deepEqual(failures, [], `${failures.length} of ${probes} join-service probes failed`);
        const upgraded = await listRunning(c, workspace);
        assert.deepEqual(
          upgraded.map((i) => i.image),
          Array(5).fill(cloud.newImage),
        );
        assert.ok(cloud.sawEventualConsistency(c));

        const scaleStarted = Date.now();
        assert.deepEqual(await applyCounts(c, workspace, 5, 4), {
          control_plane_default: [3, 5],
          worker_default: [2, 4],
        });
        await pollUntil(async () => ((await storeHealth(c, workspace)).members.length === 5 ? true : undefined), {
          timeoutMs: 60_000,
          intervalMs: 500,
          what: 'the two new control planes as etcd members',
        });
        const nine = await listRunning(c, workspace);
        const newest = [
          ...newestFirst(nine.filter((i) => i.role === 'control-plane')).slice(0, 2),
          ...newestFirst(nine.filter((i) => i.role === 'worker')).slice(0, 3),
        ].map((i) => i.id.toLowerCase());
        const removedBefore = cloud.removed(c).length;
        const requestsBefore = cloud.requestCount(c);
        assert.deepEqual(await applyCounts(c, workspace, 3, 1), {
          control_plane_default: [5, 3],
          worker_default: [4, 1],
        });
        assert.deepEqual(cloud.removed(c).slice(removedBefore).sort(), newest.sort());
        assert.equal(
          cloud.sizeChangedSince(c, requestsBefore),
          false,
          'scale-in changed no group size for the cloud to choose a victim',
        );
        const health = await storeHealth(c, workspace);
        assert.deepEqual([health.members.length, health.healthyVoters, health.quorum], [3, 3, true]);
        const final = await waitForStatus(
          c.cloud,
          (s) => s.nodes.length === 4 && s.nodes.every((n) => n.state === 'joined'),
          60_000,
        );
        assert.deepEqual(final.nodes.map((n) => n.role).sort(), [
          'control-plane',
          'control-plane',
          'control-plane',
          'worker',
        ]);
        console.log(
          `      ${cloud.name}: up 3 + 2 in ${(upMs / 1000).toFixed(1)} s; upgrade in ${(rolloutMs / 1000).toFixed(1)} s (${probes} join probes through the LB, 0 failed); ` +
            `control planes 3 → 5 → 3 and workers 2 → 4 → 1, the newest removed, in ${((Date.now() - scaleStarted) / 1000).toFixed(1)} s; etcd 3/3`,
        );
      });
    });
  }
});
