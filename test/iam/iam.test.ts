/**
 * cli/iam: createIam / destroyIam with a stub provider (files, journal view, checks before anything is made) and
 * with the real Azure provider against the fake ARM (config update, a cluster's resources left alone).
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'mocha';
import { generateConfigFiles, loadConfig } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import {
  createIam,
  destroyIam,
  IAM_MARK,
  iamJournalView,
  listIamIdentities,
  regionOfZone,
  resolveIamInputs,
} from '../../cli/iam/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { FileResourceJournal, MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import type { IamCreateRequest, IamProvisioner, ProviderModule, RecordedResource } from '../../providers/contract.js';
import azure from '../../providers/azure/index.js';
import { FakeArm, FAKE_TENANT } from '../fakes/azure/arm-server.js';

const SUBSCRIPTION = '00000000-1111-2222-3333-444444444444';

/** A provider whose IAM records one identity per create and returns the given files; destroy deletes what it lists. */
function stubProvider(name: string, files: { name: string; content: string }[] = []) {
  const calls = { load: 0, create: [] as IamCreateRequest[] };
  const iam: IamProvisioner = {
    async create(request, ctx) {
      calls.create.push(request);
      await ctx.journal.record({ kind: `${name}:identity`, id: `${request.prefix}-identity`, name: 'identity' });
      return { configUpdates: { identity: `${request.prefix}-identity` }, files };
    },
    async destroy(ctx) {
      for (const r of await ctx.journal.list()) await ctx.journal.remove(r.id);
    },
    async upgrade() {
      return [];
    },
  };
  const module = {
    name,
    attestationVariants: [],
    infrastructure: () => assert.fail(),
    nodeMetadata: () => assert.fail(),
    iam: () => iam,
  } as unknown as ProviderModule;
  return { calls, loadProvider: async () => (calls.load++, module) };
}

describe('cli/iam', function () {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lib-iam-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  const base = () => ({ workspaceDir: dir, log: nullLogger, prefix: 'demo', providerConfig: {}, updateConfig: false });

  it('the journal view marks what it records and lists only identities', async () => {
    const journal = new MemoryResourceJournal([
      { kind: 'aws:vpc', id: 'vpc-1' },
      { kind: 'aws:iam-role', id: 'old-role' },
    ]);
    const view = iamJournalView(journal);
    await view.record({ kind: 'azure:resource-group', id: 'rg', data: { region: 'x' } });
    assert.deepEqual((await journal.list()).find((r) => r.id === 'rg')?.data, { region: 'x', [IAM_MARK]: true });
    assert.deepEqual(
      (await view.list()).map((r) => r.id),
      ['old-role', 'rg'],
    );
    assert.deepEqual(
      (await listIamIdentities(journal)).map((i) => i.id),
      ['old-role', 'rg'],
    );
  });

  it('writes the returned files 0600; a re-run with the same content is fine; other content is never overwritten', async () => {
    const journal = new FileResourceJournal(dir);
    const first = stubProvider('cloud', [{ name: 'key.json', content: 'secret-1' }]);
    const result = await createIam({ ...base(), provider: 'cloud', journal, loadProvider: first.loadProvider });
    const file = path.join(dir, 'key.json');
    assert.deepEqual(result.files, [file]);
    assert.equal(await fs.readFile(file, 'utf8'), 'secret-1');
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    assert.deepEqual(result.identities, [{ kind: 'cloud:identity', id: 'demo-identity', name: 'identity' }]);
    assert.equal(result.configUpdated, false);

    await createIam({ ...base(), provider: 'cloud', journal, loadProvider: first.loadProvider });
    const other = stubProvider('cloud', [{ name: 'key.json', content: 'secret-2' }]);
    await assert.rejects(
      createIam({ ...base(), provider: 'cloud', journal, loadProvider: other.loadProvider }),
      (e: UserError) => {
        assert.match(e.message, /key\.json already exists: iam create does not overwrite it/);
        assert.doesNotMatch(`${e.message} ${e.hint}`, /secret-2/);
        return true;
      },
    );
    assert.equal(await fs.readFile(file, 'utf8'), 'secret-1');

    const unsafe = stubProvider('cloud', [{ name: '../escape', content: 'x' }]);
    await assert.rejects(
      createIam({ ...base(), provider: 'cloud', journal, loadProvider: unsafe.loadProvider }),
      /unsafe name/,
    );
    await assert.rejects(fs.access(path.join(dir, '..', 'escape')));
  });

  it('checks before the provider runs: a GCP key file in the way, --update-config without a config or for another cloud', async () => {
    const journal = new MemoryResourceJournal();
    const gcp = stubProvider('gcp');
    await fs.writeFile(path.join(dir, 'gcpServiceAccountKey.json'), 'old key');
    await assert.rejects(createIam({ ...base(), provider: 'gcp', journal, loadProvider: gcp.loadProvider }), {
      name: 'FileExistsError',
    });
    assert.equal(gcp.calls.load, 0);

    const aws = stubProvider('aws');
    await assert.rejects(
      createIam({ ...base(), provider: 'aws', updateConfig: true, journal, loadProvider: aws.loadProvider }),
      /There is no constellation-conf\.yaml/,
    );
    await generateConfigFiles(dir, 'azure');
    await assert.rejects(
      createIam({ ...base(), provider: 'aws', updateConfig: true, journal, loadProvider: aws.loadProvider }),
      /is for azure, not aws/,
    );
    assert.equal(aws.calls.load, 0);
    assert.deepEqual(await journal.list(), []);
  });

  it('refuses a provider without IAM, and destroy deletes identities only, provider by provider', async () => {
    await assert.rejects(
      createIam({ ...base(), provider: 'local', journal: new MemoryResourceJournal() }),
      /The local provider makes no cloud identities/,
    );

    const journal = new MemoryResourceJournal([{ kind: 'cloud:vpc', id: 'cluster-vpc' }]);
    const stub = stubProvider('cloud');
    await createIam({ ...base(), provider: 'cloud', journal, loadProvider: stub.loadProvider });
    const result = await destroyIam({ workspaceDir: dir, journal, log: nullLogger, loadProvider: stub.loadProvider });
    assert.deepEqual(result, {
      providers: ['cloud'],
      destroyed: [{ kind: 'cloud:identity', id: 'demo-identity', name: 'identity' }],
    });
    assert.deepEqual(
      (await journal.list()).map((r) => r.id),
      ['cluster-vpc'],
    );
    assert.deepEqual(
      await destroyIam({ workspaceDir: dir, journal, log: nullLogger, loadProvider: stub.loadProvider }),
      { providers: [], destroyed: [] },
    );
  });

  it('destroy says so when a provider leaves identities recorded', async () => {
    const journal = new MemoryResourceJournal([{ kind: 'cloud:iam-thing', id: 'x' }]);
    const lazy = {
      name: 'cloud',
      iam: () => ({ create: () => assert.fail(), destroy: async () => {} }),
    } as unknown as ProviderModule;
    await assert.rejects(
      destroyIam({ workspaceDir: dir, journal, log: nullLogger, loadProvider: async () => lazy }),
      /left 1 recorded identities/,
    );
  });

  it('resolves inputs: given flags over the config, empty config fields ignored, a zone implies its region', async () => {
    assert.deepEqual(await resolveIamInputs(dir, 'aws', { zone: 'eu-central-1b', region: undefined }), {
      providerConfig: { zone: 'eu-central-1b', region: 'eu-central-1' },
      given: { zone: 'eu-central-1b', region: 'eu-central-1' },
      configProvider: undefined,
      configProblem: undefined,
    });
    assert.equal(regionOfZone('gcp', 'europe-west3-a'), 'europe-west3');
    assert.equal(regionOfZone('aws', 'us-gov-west-1a'), 'us-gov-west-1');
    assert.equal(regionOfZone('azure', '1'), undefined);

    await generateConfigFiles(dir, 'gcp');
    const gcp = await resolveIamInputs(dir, 'gcp', { project: 'p', region: undefined, zone: undefined });
    assert.equal(gcp.providerConfig.project, 'p');
    assert.equal(gcp.providerConfig.region, (await loadConfig(dir, { allowIncomplete: true })).provider.gcp!.region);
    assert.ok(!('serviceAccountKeyPath' in gcp.providerConfig), 'empty fields are not inputs');
    assert.deepEqual(gcp.given, { project: 'p' });
    assert.deepEqual(
      (await resolveIamInputs(dir, 'aws', {})).providerConfig,
      {},
      'a config of another cloud gives no defaults',
    );

    await fs.appendFile(path.join(dir, 'constellation-conf.yaml'), 'unknownKey: 1\n');
    const broken = await resolveIamInputs(dir, 'gcp', {});
    assert.deepEqual(broken.providerConfig, {});
    assert.match(broken.configProblem ?? '', /unknownKey/);
  });

  describe('with the Azure provider (fake ARM)', function () {
    let fake: FakeArm;
    beforeEach(async () => {
      fake = await FakeArm.start();
    });
    afterEach(async () => {
      await fake.stop();
    });

    it('--update-config writes the identity into the config keeping its comments; destroy leaves the cluster resource group', async () => {
      await generateConfigFiles(dir, 'azure');
      const configFile = path.join(dir, 'constellation-conf.yaml');
      const comments = (t: string) => t.split('\n').filter((l) => l.trim().startsWith('#'));
      const before = await fs.readFile(configFile, 'utf8');
      // The cluster's resource group exists and `create` recorded it: iam create uses it but does not take it over.
      const rgId = `/subscriptions/${SUBSCRIPTION}/resourceGroups/demo-rg`;
      fake.seed(rgId, { location: 'westeurope', properties: { provisioningState: 'Succeeded' } });
      const clusterRecord: RecordedResource = {
        kind: 'azure:resource-group',
        id: rgId,
        name: 'demo-rg',
        data: { uid: 'a1b2c3d4', status: 'ready' },
      };
      const journal = new FileResourceJournal(dir);
      await journal.record(clusterRecord);
      const progress: string[] = [];

      const inputs = await resolveIamInputs(dir, 'azure', { subscription: SUBSCRIPTION, location: 'westeurope' });
      const result = await createIam({
        ...base(),
        provider: 'azure',
        providerConfig: inputs.providerConfig,
        alsoInConfig: inputs.given,
        updateConfig: true,
        journal,
        progress: (m) => progress.push(m),
        loadProvider: async () => azure,
        providerOptions: fake.providerOptions(),
      });
      const identityId = `${rgId}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/demo-nodes`;
      assert.equal(result.configUpdated, true);
      const azureConfig = (await loadConfig(dir, { allowIncomplete: true })).provider.azure!;
      assert.equal(azureConfig.subscription, SUBSCRIPTION);
      assert.equal(azureConfig.tenant, FAKE_TENANT);
      assert.equal(azureConfig.resourceGroup, 'demo-rg');
      assert.equal(azureConfig.userAssignedIdentity, identityId);
      assert.deepEqual(comments(await fs.readFile(configFile, 'utf8')), comments(before));
      assert.ok(progress.some((m) => /managed identity demo-nodes/.test(m)));
      assert.deepEqual(result.identities.map((i) => i.kind).sort(), [
        'azure:role-assignment',
        'azure:role-assignment',
        'azure:user-assigned-identity',
      ]);

      const destroyed = await destroyIam({
        workspaceDir: dir,
        journal,
        log: nullLogger,
        loadProvider: async () => azure,
        providerOptions: fake.providerOptions(),
      });
      assert.equal(destroyed.destroyed.length, 3);
      assert.deepEqual(fake.resourceIds(), [rgId], 'only the identity and its role assignments are gone');
      assert.deepEqual(await journal.list(), [clusterRecord]);
    });
  });
});
