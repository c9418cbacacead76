import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import { parseDocument } from 'yaml';
import { terminateCluster } from '../../cli/cluster/terminate.js';
import {
  createCluster,
  createClusterWithRollBack,
  initSecretPassword,
  ROLL_BACK_QUESTION,
  type RollBackOptions,
} from '../../cli/cluster/create.js';
import { UserError } from '../../lib/errors.js';
import { generateConfigFiles, loadConfig, measurementsOf } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { emptyState, readState, writeState } from '../../lib/workspace/state.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { FileResourceJournal, MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { AzureInfrastructure } from '../../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../../providers/azure/options.js';
import { GcpInfrastructure } from '../../providers/gcp/infrastructure.js';
import { FakeArm } from '../fakes/azure/arm-server.js';
import { FakeGcp } from '../fakes/gcp/server.js';
import { IDENTITY, RESOURCE_GROUP, SUBSCRIPTION } from '../providers/azure/fixtures.js';
import { PROJECT } from '../providers/gcp/support.js';
import type { CreateRequest, ProviderContext, TerminateOptions } from '../../providers/contract.js';
import { MeasuringMemoryProvider, MemoryProvider } from './support/stand-in.js';
import { SignatureError } from '../../lib/images/signed-measurements.js';
import { LocalImageStore, removeImageTree } from '../../providers/local/image-store.js';
import { fakeBuild, setConfigKeys } from '../images/support.js';
import { IMAGE_MEASUREMENTS, localWorkspace, tempDir } from './support/workspace.js';
import { fillImageMeasurements } from '../support/image-measurements.js';

describe('createCluster', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await localWorkspace();
  });
  afterEach(async () => {
    await removeImageTree(ws);
  });

  const create = (provider: MemoryProvider) =>
    createCluster({ workspaceDir: ws, provider, journal: new MemoryResourceJournal(), log: nullLogger });

  it('persists uid and init secret before calling the provider, which gets only the bcrypt hash', async () => {
    const provider = new MemoryProvider();
    let stateDuringCreate;
    provider.onCreate = async () => {
      stateDuringCreate = await readState(ws);
    };
    const result = await create(provider);
    const state = await readState(ws);
    assert.match(state.infrastructure.uid, /^[0-9a-f]{8}$/);
    assert.match(state.infrastructure.initSecret, /^[0-9a-f]{64}$/);
    assert.deepEqual(stateDuringCreate!.infrastructure.uid, state.infrastructure.uid);
    assert.deepEqual(stateDuringCreate!.infrastructure.initSecret, state.infrastructure.initSecret);
    const request = provider.requests[0];
    assert.equal(request.uid, state.infrastructure.uid);
    assert.ok(
      !JSON.stringify(request).includes(state.infrastructure.initSecret),
      'the plain init secret never goes to the provider',
    );
    assert.ok(
      await bcrypt.compare(
        initSecretPassword(Buffer.from(state.infrastructure.initSecret, 'hex')),
        request.initSecretHash,
      ),
    );
    assert.match(request.initSecretHash, /^\$2[ab]\$04\$/, "bcrypt's least cost: the secret is 32 random bytes");
    assert.deepEqual(
      request.nodeGroups.map((g) => [g.name, g.role, g.initialCount]),
      [
        ['control_plane_default', 'control-plane', 1],
        ['worker_default', 'worker', 1],
      ],
    );
    assert.equal(state.infrastructure.clusterEndpoint, '127.0.0.1');
    assert.deepEqual(state.infrastructure.local, { prefix: '127.0.0' });
    assert.deepEqual(result, { uid: state.infrastructure.uid, clusterEndpoint: '127.0.0.1', resumed: false });
  });

  it('continues an interrupted create with the same uid and init secret', async () => {
    const provider = new MemoryProvider();
    provider.onCreate = () => {
      throw new Error('killed');
    };
    await assert.rejects(create(provider), /killed/);
    const first = await readState(ws);
    provider.onCreate = undefined;
    const result = await create(provider);
    assert.equal(result.resumed, true);
    const second = await readState(ws);
    assert.equal(second.infrastructure.uid, first.infrastructure.uid);
    assert.equal(second.infrastructure.initSecret, first.infrastructure.initSecret);
    assert.equal(provider.requests[1].uid, first.infrastructure.uid);
  });

  it('writes the measurements of the image a measuring provider boots into the config, keeping the others', async () => {
    const before = measurementsOf(await loadConfig(ws));
    const text = await fs.readFile(`${ws}/constellation-conf.yaml`, 'utf8');
    await create(new MeasuringMemoryProvider(IMAGE_MEASUREMENTS));
    const after = measurementsOf(await loadConfig(ws));
    assert.deepEqual(after, { ...before, ...IMAGE_MEASUREMENTS });
    const written = await fs.readFile(`${ws}/constellation-conf.yaml`, 'utf8');
    assert.ok(written.includes('# clusterID: zero until the node joins a cluster'), 'comments stay');
    assert.ok(written.indexOf('\n      4:') < written.indexOf('\n      8:'), 'PCRs stay in order');
    assert.notEqual(written, text);
  });

  describe('on a versioned local image', () => {
    let userConfigDir: string;
    let store: LocalImageStore;
    beforeEach(async () => {
      userConfigDir = path.join(ws, 'user-config');
      const nodeBinary = path.join(ws, 'node');
      await fs.writeFile(nodeBinary, 'runtime');
      store = new LocalImageStore({ userConfigDir, nodeBinary });
      await store.create('v1', await fakeBuild(path.join(ws, 'repo')));
      await setConfigKeys(ws, { image: 'v1' });
    });
    const createOn = (provider: MemoryProvider) =>
      createCluster({
        workspaceDir: ws,
        provider,
        journal: new MemoryResourceJournal(),
        log: nullLogger,
        imageSource: { userConfigDir },
      });

    it("writes the image's signed measurements into the config, not what the provider measures", async () => {
      const provider = new MeasuringMemoryProvider(IMAGE_MEASUREMENTS);
      await createOn(provider);
      const signed = await store.measurements('v1', (await store.publicKey())!);
      assert.deepEqual(measurementsOf(await loadConfig(ws)), signed.measurements);
      assert.equal(provider.requests[0].image, 'v1');
    });

    it('refuses measurements edited after signing before anything exists: no state, no provider call, config unchanged', async () => {
      const file = path.join(store.imageDir('v1'), 'measurements.json');
      await fs.writeFile(file, (await fs.readFile(file, 'utf8')).replace('"warnOnly": true', '"warnOnly": false'));
      const config = await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8');
      const provider = new MemoryProvider();
      await assert.rejects(
        createOn(provider),
        (err: Error) => err instanceof SignatureError && err.message.includes('of local image v1'),
      );
      assert.equal(provider.requests.length, 0);
      assert.equal((await readState(ws)).infrastructure.uid, '');
      assert.equal(await fs.readFile(path.join(ws, CONFIG_FILE), 'utf8'), config);
    });
  });

  it('refuses a workspace whose cluster is initialized', async () => {
    const state = await readState(ws);
    state.clusterValues.clusterID = 'ab'.repeat(32);
    await writeState(ws, state);
    await assert.rejects(create(new MemoryProvider()), (err: Error & { hint?: string }) => {
      assert.match(err.message, /already has an initialized cluster/);
      assert.match(err.hint ?? '', /constellation terminate/);
      return true;
    });
  });
});

/** What a cloud provider throws when it stopped half-way with everything it made in the journal. */
class HalfWayError extends UserError {
  readonly canRollBack = true;
}

/** Records one resource, then fails like a cloud refusing a step; its terminate deletes what the journal holds. */
class FailingProvider extends MemoryProvider {
  failure: Error = new HalfWayError(
    'Creating the NAT gateway failed: NatGatewayLimitExceeded: the maximum number of NAT gateways has been reached.',
    {
      hint: 'the create hint',
      cause: new UserError('NatGatewayLimitExceeded', { hint: 'Ask AWS for a higher quota.' }),
    },
  );
  terminateFailure?: Error;
  readonly terminateCalls: (TerminateOptions | undefined)[] = [];

  override async create(request: CreateRequest, ctx: ProviderContext): Promise<never> {
    this.requests.push(request);
    await ctx.journal.record({ kind: 'local:vpc', id: 'vpc-1' });
    throw this.failure;
  }

  override async terminate(ctx?: ProviderContext, options?: TerminateOptions): Promise<void> {
    this.terminateCalls.push(options);
    if (this.terminateFailure) throw this.terminateFailure;
    for (const r of await ctx!.journal.list()) await ctx!.journal.remove(r.id);
  }
}

describe('createClusterWithRollBack', () => {
  let ws: string;
  let journal: MemoryResourceJournal;
  let said: string[];
  let asked: string[];
  beforeEach(async () => {
    ws = await localWorkspace();
    journal = new MemoryResourceJournal();
    said = [];
    asked = [];
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  const answer = (yes: boolean) => async (question: string) => (asked.push(question), yes);
  const create = (provider: MemoryProvider, rollBack: Partial<RollBackOptions>, steps: string[] = []) =>
    createClusterWithRollBack({
      workspaceDir: ws,
      provider,
      journal,
      log: nullLogger,
      rollBack: {
        yes: false,
        interactive: false,
        ask: async () => assert.fail('must not ask'),
        say: (line) => said.push(line),
        ...rollBack,
      },
      runStep: (title, fn) => (steps.push(title), fn(() => undefined)),
    });
  const failure = (run: Promise<unknown>) =>
    run.then(
      () => assert.fail('create must fail'),
      (err: unknown) => err as UserError,
    );

  it('creates like createCluster when nothing fails', async () => {
    const steps: string[] = [];
    const result = await create(new MemoryProvider(), {}, steps);
    assert.equal(result.clusterEndpoint, '127.0.0.1');
    assert.deepEqual(steps, ['Creating the cluster (local provider)']);
    assert.deepEqual(said, []);
  });

  it('with -y rolls back without asking: the provider deletes what the journal holds, the state is empty again', async () => {
    const provider = new FailingProvider();
    const steps: string[] = [];
    const err = await failure(create(provider, { yes: true, interactive: true }, steps));
    assert.ok(err instanceof UserError);
    assert.match(err.message, /NatGatewayLimitExceeded: the maximum number of NAT gateways/, "the cloud's message");
    assert.match(
      err.hint ?? '',
      /^Ask AWS for a higher quota\. .*constellation create/,
      "the cause's hint, then what to do",
    );
    assert.deepEqual(provider.terminateCalls, [undefined], 'terminated once, not by tag');
    assert.deepEqual(await journal.list(), []);
    assert.deepEqual(await readState(ws), emptyState());
    assert.deepEqual(steps, ['Creating the cluster (local provider)', 'Rolling back: deleting what was created']);
    assert.ok(
      said.some((l) => /^Rolled back/.test(l)),
      said.join('\n'),
    );
  });

  it('on a terminal says what failed, then asks; yes rolls back', async () => {
    const provider = new FailingProvider();
    await failure(create(provider, { interactive: true, ask: answer(true) }));
    assert.deepEqual(asked, [ROLL_BACK_QUESTION]);
    assert.match(said[0], /^Create failed: .*NatGatewayLimitExceeded/);
    assert.equal(provider.terminateCalls.length, 1);
    assert.deepEqual(await journal.list(), []);
  });

  it('on a terminal, no keeps everything and names the commands that continue or delete it', async () => {
    const provider = new FailingProvider();
    const err = await failure(create(provider, { interactive: true, ask: answer(false) }));
    assert.equal(err, provider.failure, "the provider's error, with its hint");
    assert.equal(provider.terminateCalls.length, 0);
    assert.deepEqual(
      (await journal.list()).map((r) => r.id),
      ['vpc-1'],
    );
    assert.notEqual((await readState(ws)).infrastructure.uid, '', 'the uid stays for the next run');
    assert.ok(
      said.some((l) => l.includes(`constellation create -C ${ws} `) && /continues/.test(l)),
      said.join('\n'),
    );
    assert.ok(
      said.some((l) => l.includes(`constellation terminate -C ${ws} `) && /deletes/.test(l)),
      said.join('\n'),
    );
  });

  it('without a terminal and without -y does not roll back, does not ask, and prints the two commands', async () => {
    const provider = new FailingProvider();
    const err = await failure(create(provider, {}));
    assert.equal(err, provider.failure);
    assert.equal(provider.terminateCalls.length, 0);
    assert.deepEqual(asked, []);
    assert.ok(said.some((l) => /constellation create\b/.test(l)));
    assert.ok(said.some((l) => /constellation terminate\b/.test(l)));
    assert.ok(!said.some((l) => /^Create failed/.test(l)), 'the error itself says what failed');
  });

  it('leaves an error that offers no roll back alone', async () => {
    const provider = new FailingProvider();
    provider.failure = new UserError('The image is not registered with NitroTPM.');
    const err = await failure(create(provider, { yes: true }));
    assert.equal(err, provider.failure);
    assert.equal(provider.terminateCalls.length, 0);
    assert.deepEqual(said, []);
  });

  it('a failed roll back says both failures and that terminate continues it', async () => {
    const provider = new FailingProvider();
    provider.terminateFailure = new UserError('Deleting the VPC failed: DependencyViolation');
    const err = await failure(create(provider, { yes: true }));
    assert.match(
      err.message,
      /NatGatewayLimitExceeded[\s\S]*Rolling back failed too: Deleting the VPC failed: DependencyViolation/,
    );
    assert.match(err.hint ?? '', /constellation terminate/);
    assert.deepEqual(
      (await journal.list()).map((r) => r.id),
      ['vpc-1'],
      'what is left stays recorded',
    );
    assert.notEqual((await readState(ws)).infrastructure.uid, '');
  });
});

/**
 * The same through cli/cluster with the real Azure and GCP providers against their fakes. (The CLI cannot be pointed
 * at these fakes from outside: neither SDK takes its API endpoint from the environment, and the fakes need an auth
 * client or a test CA; test/cli/cloud-aws.test.ts runs the CLI against the fake AWS.)
 */
describe('create and terminate through cli/cluster against the Azure and GCP fakes', () => {
  let ws: string;
  let said: string[];
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  /** A workspace with a generated config of the cloud, with the fields only an account knows set. */
  async function cloudWorkspace(cloud: 'azure' | 'gcp', fields: Record<string, unknown>): Promise<string> {
    const dir = await tempDir('cl-cloud-');
    await generateConfigFiles(dir, cloud);
    await fillImageMeasurements(dir);
    const file = path.join(dir, CONFIG_FILE);
    const doc = parseDocument(await fs.readFile(file, 'utf8'));
    for (const [key, value] of Object.entries(fields)) doc.setIn(key.split('.'), value);
    await fs.writeFile(file, doc.toString());
    return dir;
  }

  const session = (provider: AzureInfrastructure | GcpInfrastructure, yes: boolean) => ({
    workspaceDir: ws,
    provider,
    journal: new FileResourceJournal(ws),
    log: nullLogger,
    rollBack: { yes, interactive: false, say: (line: string) => said.push(line) },
  });

  describe('gcp', () => {
    let fake: FakeGcp;
    before(async () => {
      fake = await FakeGcp.start();
    });
    beforeEach(async () => {
      fake.reset({ operationMs: 2 });
      said = [];
      ws = await cloudWorkspace('gcp', {
        image: 'projects/constellation-images/global/images/constellation-v2-18-0',
        'provider.gcp.project': PROJECT,
        'provider.gcp.serviceAccountKeyPath': 'gcpServiceAccountKey.json',
        'provider.gcp.IAMServiceAccountVM': 'vm@fake-project.iam.gserviceaccount.com',
      });
    });
    after(async () => {
      await fake?.close();
    });

    it('create records endpoint and uid, every instance carries the uid; terminate leaves the fake empty', async () => {
      const provider = new GcpInfrastructure(fake.providerOptions());
      const result = await createClusterWithRollBack(session(provider, false));
      const state = await readState(ws);
      assert.equal(state.infrastructure.uid, result.uid);
      assert.match(state.infrastructure.clusterEndpoint, /^\d+\.\d+\.\d+\.\d+$/);
      // The networks init hands the bootstrapper (pod network for kubeadm's podSubnet, node network for Cilium).
      assert.equal(state.infrastructure.ipCidrNode, '192.168.178.0/24');
      assert.equal(state.infrastructure.gcp?.ipCidrPod, '10.10.0.0/16');
      const instances = fake.compute.list('instances');
      assert.equal(instances.length, 4);
      assert.ok(instances.every((i) => (i.labels as Record<string, string>)['constellation-uid'] === result.uid));

      await terminateCluster({ workspaceDir: ws, journal: new FileResourceJournal(ws), log: nullLogger, provider });
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await new FileResourceJournal(ws).list(), []);
    });

    it('a refused step with -y is rolled back: nothing is left in the fake', async () => {
      fake.inject({
        match: /^POST .*\/firewalls/,
        status: 403,
        reason: 'forbidden',
        message: "Required 'compute.firewalls.create' permission",
      });
      const provider = new GcpInfrastructure(fake.providerOptions());
      await assert.rejects(createClusterWithRollBack(session(provider, true)), /compute\.firewalls\.create/);
      assert.ok(said.some((l) => /^Rolled back/.test(l)));
      assert.ok(fake.calls(/^DELETE /).length > 0, 'something had been made');
      assert.deepEqual(fake.compute.list(), []);
      assert.deepEqual(await readState(ws), emptyState());
    });
  });

  describe('azure', () => {
    let fake: FakeArm;
    const rgId = `/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`;
    beforeEach(async () => {
      fake = await FakeArm.start();
      fake.seed(rgId, { location: 'westeurope', properties: { provisioningState: 'Succeeded' } });
      // The config's default location (config generate azure).
      fake.seedGalleryImage(
        SUBSCRIPTION,
        'westus',
        '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.19.0',
      );
      said = [];
      ws = await cloudWorkspace('azure', {
        image: '/CommunityGalleries/ConstellationCVM-b3782fa0/Images/constellation/Versions/2.19.0',
        'provider.azure.subscription': SUBSCRIPTION,
        'provider.azure.tenant': '72f988bf-0000-0000-0000-000000000001',
        'provider.azure.resourceGroup': RESOURCE_GROUP,
        'provider.azure.userAssignedIdentity': IDENTITY,
      });
    });
    afterEach(async () => {
      await fake?.stop();
    });

    it('create records endpoint and uid, the scale sets are confidential and tagged; terminate leaves only the resource group', async () => {
      const provider = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
      const result = await createClusterWithRollBack(session(provider, false));
      const state = await readState(ws);
      assert.equal(state.infrastructure.uid, result.uid);
      assert.equal(state.infrastructure.clusterEndpoint, result.clusterEndpoint);
      const scaleSets = fake.find('PUT', 'virtualMachineScaleSets/').map(
        (r) =>
          r.body as {
            tags: Record<string, string>;
            properties: { virtualMachineProfile: { securityProfile: { securityType: string } } };
          },
      );
      assert.equal(scaleSets.length, 2);
      for (const set of scaleSets) {
        assert.equal(set.properties.virtualMachineProfile.securityProfile.securityType, 'ConfidentialVM');
        assert.equal(set.tags['constellation-uid'], result.uid);
      }

      await terminateCluster({ workspaceDir: ws, journal: new FileResourceJournal(ws), log: nullLogger, provider });
      assert.deepEqual(fake.resourceIds(), [rgId], "the resource group is iam create's");
      assert.deepEqual(await new FileResourceJournal(ws).list(), []);
    });

    it('a failed step with -y is rolled back: nothing of the cluster is left', async () => {
      fake.inject({
        method: 'PUT',
        path: 'virtualMachineScaleSets/',
        asyncError: { code: 'AllocationFailed', message: 'Allocation failed. We do not have sufficient capacity.' },
      });
      const provider = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
      await assert.rejects(createClusterWithRollBack(session(provider, true)), /AllocationFailed|sufficient capacity/);
      assert.ok(said.some((l) => /^Rolled back/.test(l)));
      assert.ok(fake.find('DELETE', '/providers/').length > 0, 'something had been made');
      assert.deepEqual(fake.resourceIds(), [rgId]);
      assert.deepEqual(await readState(ws), emptyState());
    });
  });
});
