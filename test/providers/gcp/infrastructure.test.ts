/**
 * The GCP InfrastructureProvider against the fake Compute API: what create sends (confidential settings,
 * labels, metadata, state disk, ports, health checks), the dependency order, idempotence and recovery
 * (re-run, interruption, adoption), throttling, permanent errors, terminate (journal and by tag) and the
 * instance operations.
 */
import assert from 'node:assert/strict';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';
import { UserError } from '../../../lib/errors.js';
import type { RecordedResource } from '../../../providers/contract.js';
import { CreateFailedError } from '../../../providers/gcp/errors.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { LOAD_BALANCER_PORTS } from '../../../providers/gcp/plan.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, INIT_SECRET_HASH, PROJECT, providerContext, ZONE } from './support.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('GCP infrastructure (fake Compute API)', function () {
  let fake: FakeGcp;
  let infra: GcpInfrastructure;

  // One fake and one provider (its SDK clients are costly to make) for all tests; the fake is reset before each.
  before(async () => {
    fake = await FakeGcp.start();
    infra = new GcpInfrastructure(fake.providerOptions());
  });
  beforeEach(() => fake.reset({ operationMs: 3 }));
  after(async () => {
    await fake.close();
  });

  const inserts = (collection: string) => fake.calls(new RegExp(`^POST .*/${collection}$`)).map((r) => r.body as Json);
  const insertCount = () =>
    fake
      .calls(/^POST .*\/[A-Za-z]+$/)
      .filter((r) => !/\/(wait|resize|deleteInstances|listManagedInstances)$/.test(r.path)).length;

  describe('create', () => {
    it('makes confidential instance templates with the state disk, labels and node metadata', async () => {
      await infra.create(createRequest(), providerContext());
      const templates = inserts('instanceTemplates');
      assert.equal(templates.length, 2);
      const cp = templates.find((t) => t.name.includes('control-plane'))!.properties;
      assert.deepEqual(cp.confidentialInstanceConfig, {
        confidentialInstanceType: 'SEV_SNP',
        enableConfidentialCompute: true,
      });
      // Secure Boot off, as upstream: it changes PCR 7 and unsigned node images do not boot.
      assert.deepEqual(cp.shieldedInstanceConfig, {
        enableVtpm: true,
        enableIntegrityMonitoring: true,
        enableSecureBoot: false,
      });
      assert.equal(cp.scheduling.onHostMaintenance, 'TERMINATE');
      assert.equal(cp.minCpuPlatform, 'AMD Milan');
      assert.equal(cp.machineType, 'n2d-standard-4');
      const stateDisk = cp.disks.find((d: Json) => d.deviceName === 'state-disk');
      assert.deepEqual(
        [
          stateDisk.boot,
          stateDisk.autoDelete,
          stateDisk.initializeParams.diskSizeGb,
          stateDisk.initializeParams.diskType,
        ],
        [false, true, '30', 'pd-ssd'],
      );
      const boot = cp.disks.find((d: Json) => d.boot);
      assert.equal(boot.initializeParams.sourceImage, createRequest().image);
      assert.deepEqual(cp.labels, {
        team: 'platform',
        'constellation-uid': 'a1b2c3d4',
        'constellation-role': 'control-plane',
        'constellation-node-group': 'control_plane_default',
      });
      const metadata = Object.fromEntries(cp.metadata.items.map((i: Json) => [i.key, i.value]));
      assert.equal(metadata['constellation-init-secret-hash'], INIT_SECRET_HASH);
      assert.equal(metadata['constellation-uid'], 'a1b2c3d4');
      assert.equal(metadata['constellation-role'], 'control-plane');
      assert.equal(metadata['constellation-node-group'], 'control_plane_default');
      assert.match(metadata['constellation-load-balancer'], /^203\.0\.113\.\d+$/);
      assert.deepEqual(cp.serviceAccounts[0].email, 'vm@fake-project.iam.gserviceaccount.com');
      const worker = templates.find((t) => t.name.includes('worker'))!.properties;
      assert.equal(worker.labels['constellation-role'], 'worker');
      assert.equal(worker.disks.find((d: Json) => d.deviceName === 'state-disk').initializeParams.diskSizeGb, '50');

      const groups = inserts('instanceGroupManagers');
      assert.deepEqual(groups.map((g) => g.targetSize).sort(), [2, 3]);
      // Instances made from the templates carry the labels nodes and terminate look for.
      const instances = fake.compute.list('instances');
      assert.equal(instances.length, 5);
      assert.ok(instances.every((i) => (i.labels as Json)['constellation-uid'] === 'a1b2c3d4'));
    });

    it('uses SEV (not SNP) for gcp-sev-es and accepts c2d machines', async () => {
      const request = createRequest({ attestationVariant: 'gcp-sev-es' });
      request.nodeGroups[1]!.instanceType = 'c2d-standard-8';
      await infra.create(request, providerContext());
      const templates = inserts('instanceTemplates').map((t) => t.properties);
      assert.ok(templates.every((p) => p.confidentialInstanceConfig.confidentialInstanceType === 'SEV'));
      assert.ok(templates.every((p) => p.minCpuPlatform === undefined));
      assert.deepEqual(templates.map((p) => p.machineType).sort(), ['c2d-standard-8', 'n2d-standard-4']);
    });

    it('refuses machine types that cannot run the variant, before any call', async () => {
      const request = createRequest();
      request.nodeGroups[0]!.instanceType = 'c2d-standard-4';
      await assert.rejects(
        infra.create(request, providerContext()),
        (err: unknown) => err instanceof UserError && /"c2d-standard-4" cannot run gcp-sev-snp/.test(err.message),
      );
      await assert.rejects(
        infra.create(createRequest({ attestationVariant: 'aws-sev-snp' }), providerContext()),
        /does not run on GCP/,
      );
      await assert.rejects(
        infra.create(createRequest({ providerConfig: { region: 'r', zone: 'z' } }), providerContext()),
        /provider\.gcp\.project/,
      );
      assert.equal(fake.requests.length, 0);
    });

    it("refuses a config without the nodes' service account, naming the key and the fix, before any call", async () => {
      for (const IAMServiceAccountVM of [undefined, '']) {
        const providerConfig = {
          project: PROJECT,
          region: 'europe-west3',
          zone: ZONE,
          ...(IAMServiceAccountVM === undefined ? {} : { IAMServiceAccountVM }),
        };
        await assert.rejects(
          infra.create(createRequest({ providerConfig }), providerContext()),
          (err: unknown) =>
            err instanceof UserError &&
            /^provider\.gcp\.IAMServiceAccountVM is required/.test(err.message) &&
            /iam create gcp/.test(err.hint ?? ''),
        );
      }
      assert.equal(fake.requests.length, 0);
    });

    it('puts the ports of docs/design.md#ports behind a global TCP proxy load balancer: health check, backend service, proxy and forwarding rule each', async () => {
      const result = await infra.create(createRequest(), providerContext());
      const ports = LOAD_BALANCER_PORTS.map(String).sort();
      const checks = inserts('healthChecks');
      assert.ok(fake.calls(/^POST .*\/global\/healthChecks$/).length === ports.length, 'global health checks');
      assert.deepEqual(checks.map((c) => String(c.tcpHealthCheck?.port ?? c.httpsHealthCheck?.port)).sort(), ports);
      assert.deepEqual(checks.find((c) => c.type === 'HTTPS')!.httpsHealthCheck, {
        port: 6443,
        requestPath: '/readyz',
      });
      const backends = inserts('backendServices');
      assert.equal(fake.calls(/^POST .*\/global\/backendServices$/).length, ports.length);
      for (const b of backends) {
        assert.deepEqual([b.loadBalancingScheme, b.protocol, b.healthChecks.length], ['EXTERNAL', 'TCP', 1]);
        // Only the control plane serves these ports, through the group's named port.
        assert.deepEqual(
          b.backends.map((x: Json) => x.group.split('/').pop()),
          ['constell-a1b2c3d4-control-plane-default'],
        );
      }
      assert.deepEqual(backends.map((b) => b.portName).sort(), [
        'bootstrapper',
        'join',
        'kubernetes',
        'recovery',
        'verify',
      ]);
      assert.equal(inserts('targetTcpProxies').length, ports.length);
      const rules = inserts('forwardingRules');
      assert.equal(fake.calls(/^POST .*\/global\/forwardingRules$/).length, ports.length, 'global forwarding rules');
      assert.deepEqual(rules.map((r) => r.portRange).sort(), ports);
      assert.ok(
        rules.every(
          (r) =>
            r.IPAddress.endsWith('/global/addresses/constell-a1b2c3d4-lb') &&
            /\/targetTcpProxies\//.test(r.target) &&
            r.labels['constellation-uid'] === 'a1b2c3d4',
        ),
      );
      const address = fake.compute.list('addresses')[0]!;
      assert.match(String(address.selfLink), /\/global\/addresses\//);
      assert.equal(result.clusterEndpoint, address.address);
      assert.deepEqual(result.apiServerCertSANs, [address.address]);
      assert.equal(inserts('routers')[0]!.nats[0].sourceSubnetworkIpRangesToNat, 'ALL_SUBNETWORKS_ALL_IP_RANGES');
    });

    it('reaches a control-plane node on its own IP through the cluster endpoint, on every port (init and joins get through)', async () => {
      const result = await infra.create(createRequest(), providerContext());
      const controlPlane = fake.compute
        .list('instances')
        .filter((i) => (i.labels as Json)['constellation-role'] === 'control-plane');
      for (const port of LOAD_BALANCER_PORTS) {
        const delivery = fake.compute.connect(result.clusterEndpoint, port);
        assert.ok(typeof delivery === 'object', `port ${port}: ${String(delivery)}`);
        const node = controlPlane.find((i) => i.name === delivery.instance)!;
        assert.ok(node, `port ${port} reached ${delivery.instance}, a control-plane node`);
        assert.deepEqual(
          [delivery.destinationIp, delivery.destinationPort, delivery.accepted],
          [(node.networkInterfaces as Json[])[0]!.networkIP, port, true],
        );
      }
    });

    it('opens the NodePort range 30000-32767 from anywhere, as upstream', async () => {
      await infra.create(createRequest(), providerContext());
      const publicRule = inserts('firewalls').find((f) => f.name.endsWith('-public'))!;
      assert.deepEqual(publicRule.sourceRanges, ['0.0.0.0/0']);
      assert.deepEqual(
        [...publicRule.allowed[0].ports].sort(),
        [...LOAD_BALANCER_PORTS.map(String), '30000-32767'].sort(),
      );
    });

    it("keeps a control-plane node's state disk and IP when GCP recreates it (stateful group, as upstream)", async () => {
      await infra.create(createRequest(), providerContext());
      const igm = inserts('instanceGroupManagers').find((g) => g.name.includes('control-plane'))!;
      const { disks, internalIPs } = igm.statefulPolicy.preservedState;
      assert.deepEqual(
        { disks, internalIPs },
        {
          disks: { 'state-disk': { autoDelete: 'ON_PERMANENT_INSTANCE_DELETION' } },
          internalIPs: { nic0: { autoDelete: 'ON_PERMANENT_INSTANCE_DELETION' } },
        },
      );
      const node = fake.compute
        .list('instances')
        .find((i) => (i.labels as Json)['constellation-role'] === 'control-plane')!;
      const before = {
        ip: (node.networkInterfaces as Json[])[0]!.networkIP,
        disk: (node.disks as Json[]).find((d) => d.deviceName === 'state-disk')!.source,
      };
      fake.compute.recreateInstance(String(node.name));
      const again = fake.compute.list('instances').find((i) => i.name === node.name)!;
      assert.notEqual(again, node, 'a new VM');
      assert.equal((again.networkInterfaces as Json[])[0]!.networkIP, before.ip);
      assert.equal((again.disks as Json[]).find((d) => d.deviceName === 'state-disk')!.source, before.disk);
      assert.equal(
        inserts('instanceGroupManagers').find((g) => g.name.includes('worker'))!.statefulPolicy,
        undefined,
        'workers are stateless, as upstream',
      );
    });

    it('sends independent inserts concurrently and dependent ones after their dependencies', async () => {
      fake.operationMs = 30;
      // The network, the load balancer's address and a health check per load-balancer port depend on nothing: the
      // fake holds them until all are in flight, so the count below is what the provider sends at once.
      const independent = /^POST .*\/(networks|addresses|healthChecks)$/;
      const count = 2 + LOAD_BALANCER_PORTS.length;
      fake.holdUntilInFlight(independent, count, 2_000);
      await infra.create(createRequest(), providerContext());
      assert.equal(fake.calls(independent).length, count);
      assert.equal(fake.maxInFlight(independent), count, 'every independent insert in flight at once');
      const order = fake.requests
        .filter((r) => r.method === 'POST' && !r.path.endsWith('/wait'))
        .map((r) => r.path.split('/').pop());
      const first = (c: string) => order.indexOf(c);
      const last = (c: string) => order.lastIndexOf(c);
      // Network, address and all health checks go out before the first dependent insert.
      assert.ok(last('healthChecks') < first('subnetworks'));
      assert.ok(first('addresses') < first('subnetworks'));
      assert.ok(first('networks') < first('subnetworks'));
      assert.ok(last('instanceTemplates') < first('instanceGroupManagers'));
      assert.ok(last('instanceGroupManagers') < first('backendServices'));
      assert.ok(last('backendServices') < first('targetTcpProxies'));
      assert.ok(last('targetTcpProxies') < first('forwardingRules'));
    });

    it('records every resource with its dependencies, and a second run changes nothing', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      const records = await ctx.journal.list();
      assert.equal(records.length, 30);
      assert.ok(records.every((r) => r.data?.state === 'created' && r.kind.startsWith('gcp:')));
      const rule = records.find((r) => r.id.endsWith('/global/forwardingRules/constell-a1b2c3d4-fr-6443'))!;
      assert.deepEqual(rule.dependsOn, [
        `projects/${PROJECT}/global/targetTcpProxies/constell-a1b2c3d4-proxy-6443`,
        `projects/${PROJECT}/global/addresses/constell-a1b2c3d4-lb`,
      ]);
      const before = insertCount();
      const again = await infra.create(createRequest(), ctx);
      assert.equal(insertCount(), before);
      assert.match(again.clusterEndpoint, /^203\.0\.113\./);
    });
  });

  describe('recovery', () => {
    it('continues an interrupted create without inserting anything twice', async () => {
      fake.operationMs = 20;
      const controller = new AbortController();
      const journal = new MemoryResourceJournal();
      const record = journal.record.bind(journal);
      journal.record = async (r: RecordedResource) => {
        await record(r);
        if ((await journal.list()).length >= 9) controller.abort(new Error('interrupted'));
      };
      const err = await infra.create(createRequest(), providerContext(journal, controller.signal)).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof CreateFailedError && err.canRollBack, String(err));
      const recorded = await journal.list();
      assert.ok(recorded.length >= 9 && recorded.length < 30, `recorded ${recorded.length}`);
      assert.ok(
        recorded.some((r) => r.data?.state === 'creating'),
        'some operation was still running',
      );

      journal.record = record;
      const postsBefore = fake.requests.length;
      await infra.create(createRequest(), providerContext(journal));
      assert.equal((await journal.list()).length, 30);
      // Nothing the first run had recorded was inserted again (an insert in flight at the interruption may be
      // sent again: GCP answers alreadyExists and the resource is adopted).
      const reinserted = fake.requests
        .slice(postsBefore)
        .filter((r) => r.method === 'POST' && !r.path.endsWith('/wait'))
        .map((r) => `${r.path.replace(/^\/compute\/v1\//, '')}/${(r.body as Json).name}`);
      for (const r of recorded) assert.ok(!reinserted.includes(r.id), `${r.id} was inserted again`);
      assert.equal(fake.compute.list('instances').length, 5);
      assert.equal(fake.compute.list('forwardingRules').length, 5);
    });

    it('adopts a resource GCP accepted before the journal could record it', async () => {
      const journal = new MemoryResourceJournal();
      const record = journal.record.bind(journal);
      let failed = false;
      journal.record = async (r: RecordedResource) => {
        if (!failed && r.id.endsWith('/subnetworks/constell-a1b2c3d4-nodes')) {
          failed = true;
          throw new Error('disk full');
        }
        await record(r);
      };
      await assert.rejects(infra.create(createRequest(), providerContext(journal)), CreateFailedError);
      await infra.create(createRequest(), providerContext(journal));
      assert.equal(inserts('subnetworks').length, 2, 'the second insert was answered with alreadyExists');
      assert.ok((await journal.list()).some((r) => r.id.endsWith('/subnetworks/constell-a1b2c3d4-nodes')));
      assert.equal((await journal.list()).length, 30);
    });

    it('retries throttled (429) and unavailable (503) calls', async () => {
      fake.inject({ match: /^POST .*\/global\/networks/, status: 429, reason: 'rateLimitExceeded', times: 2 });
      fake.inject({ match: /\/operations\/.*\/wait/, status: 503, times: 1 });
      fake.inject({ match: /^GET .*\/addresses\//, status: 503, times: 1 });
      await infra.create(createRequest(), providerContext());
      assert.equal(inserts('networks').length, 3);
      assert.equal(fake.compute.list('forwardingRules').length, 5);
    });

    it("reports a failed operation with GCP's message and offers to roll back; terminate then cleans up", async () => {
      fake.failOperation({
        match: /instanceGroupManagers$/,
        code: 'QUOTA_EXCEEDED',
        message: "Quota 'CPUS' exceeded.  Limit: 24.0 in region europe-west3.",
      });
      const ctx = providerContext();
      const err = await infra.create(createRequest(), ctx).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof CreateFailedError, String(err));
      assert.equal(err.canRollBack, true);
      assert.match(err.message, /Quota 'CPUS' exceeded/);
      assert.match(err.message, /QUOTA_EXCEEDED/);
      assert.match(err.message, /managed instance group/);
      assert.ok(err.hint?.includes('terminate'));
      assert.equal(fake.compute.list('forwardingRules').length, 0, 'nothing after the failed step was started');
      assert.ok((await ctx.journal.list()).length > 0);

      await infra.terminate(ctx);
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await ctx.journal.list(), []);
    });

    it("reports a refused request with GCP's message", async () => {
      fake.inject({
        match: /^POST .*\/firewalls/,
        status: 403,
        reason: 'forbidden',
        message: "Required 'compute.firewalls.create' permission for 'projects/fake-project'",
      });
      const err = await infra.create(createRequest(), providerContext()).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof CreateFailedError, String(err));
      assert.match(err.message, /Required 'compute\.firewalls\.create' permission/);
      assert.match(err.message, /firewall rule/);
    });
  });

  describe('terminate', () => {
    it('deletes everything in reverse dependency order and leaves the fake empty', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      fake.requests.length = 0;
      await infra.terminate(ctx);
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await ctx.journal.list(), []);
      const order = fake.calls(/^DELETE /).map((r) => r.path.split('/').slice(-2, -1)[0]);
      const first = (c: string) => order.indexOf(c);
      const last = (c: string) => order.lastIndexOf(c);
      assert.ok(last('forwardingRules') < first('targetTcpProxies'));
      assert.ok(last('targetTcpProxies') < first('backendServices'));
      assert.ok(last('backendServices') < first('instanceGroupManagers'));
      assert.ok(last('instanceGroupManagers') < first('instanceTemplates'));
      assert.ok(last('instanceTemplates') < first('subnetworks'));
      assert.ok(last('subnetworks') < first('networks'));
      assert.equal(order.filter((c) => c === 'networks').length, 1);
    });

    it('tolerates resources that are already gone', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      const gone = [...fake.compute.resources.keys()].filter(
        (k) => /\/(forwardingRules|healthChecks)\//.test(k) && !k.includes('fr-9000'),
      );
      for (const k of gone.filter((k) => k.includes('forwardingRules'))) fake.compute.resources.delete(k);
      await infra.terminate(ctx);
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await ctx.journal.list(), []);
    });

    it('retries a delete GCP refuses while the resource is still in use', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      fake.inject({
        match: /^DELETE .*\/global\/networks\//,
        status: 400,
        reason: 'resourceInUseByAnotherResource',
        message: 'The network is already being used',
        times: 3,
      });
      await infra.terminate(ctx);
      assert.deepEqual(fake.compute.list(), []);
      assert.equal(fake.calls(/^DELETE .*\/global\/networks\//).length, 4, 'three refusals, then the delete');
    });

    it('after a failed delete still deletes everything that does not wait for it, reports it, and a re-run finishes', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      const firewalls = fake.compute.list('firewalls').length;
      assert.ok(firewalls > 0);
      fake.inject({
        match: /^DELETE .*\/firewalls\//,
        status: 403,
        reason: 'forbidden',
        message: "Required 'compute.firewalls.delete' permission",
        times: firewalls,
      });
      const err = await infra.terminate(ctx).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof UserError, String(err));
      assert.match(
        err.message,
        new RegExp(`failed for ${firewalls} resource\\(s\\): Deleting firewall rule .*compute\\.firewalls\\.delete`),
      );
      assert.match(err.hint ?? '', /constellation terminate/);
      const left = fake.compute.list().map((r) => String(r.selfLink).split('/').slice(-2, -1)[0]);
      assert.deepEqual(
        [...new Set(left)].sort(),
        ['firewalls', 'networks', 'subnetworks'],
        'only the firewall rules and the network and subnetwork they wait for are left',
      );
      assert.ok(
        (await ctx.journal.list()).every((r) => /\/(firewalls|networks|subnetworks)\//.test(r.id)),
        'the journal lists exactly what is left',
      );
      assert.equal((await ctx.journal.list()).length, left.length);

      await infra.terminate(ctx);
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await ctx.journal.list(), []);
    });

    it('with byTag also deletes resources of the cluster that the journal lost', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      for (const r of await ctx.journal.list()) {
        if (!r.id.includes('/networks/')) await ctx.journal.remove(r.id);
      }
      await infra.terminate(ctx, { byTag: true });
      assert.deepEqual(fake.compute.list(), []);
    });

    it('without byTag deletes exactly what was recorded', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      const other = providerContext();
      await infra.create(createRequest({ uid: 'other000' }), other);
      await infra.terminate(ctx);
      assert.ok(fake.compute.list().length > 0);
      assert.ok(
        fake.compute
          .list()
          .every((r) => String(r.name).includes('other000') || String(r.selfLink).includes('other000')),
      );
    });
  });

  describe('instances', () => {
    it('lists and grows node groups', async () => {
      const ctx = providerContext();
      await infra.create(createRequest(), ctx);
      const listed = await infra.listInstances(ctx);
      assert.equal(listed.length, 5);
      assert.deepEqual(
        listed.filter((i) => i.role === 'control-plane').map((i) => i.nodeGroup),
        Array(3).fill('control_plane_default'),
      );
      assert.ok(
        listed.every(
          (i) =>
            i.state === 'running' &&
            /^192\.168\.178\.\d+$/.test(i.privateIp) &&
            i.id.startsWith(`projects/${PROJECT}/zones/${ZONE}/instances/`) &&
            i.createdAt,
        ),
      );

      await infra.scaleNodeGroup('worker_default', 4, ctx);
      assert.equal((await infra.listInstances(ctx)).filter((i) => i.role === 'worker').length, 4);
      await assert.rejects(infra.scaleNodeGroup('nope', 1, ctx), /no node group named "nope"/);
      // An instance that is gone: removing it again is no error.
      await infra.removeInstance(`projects/${PROJECT}/zones/${ZONE}/instances/nope`, ctx);
    });
  });
});
