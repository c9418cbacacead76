import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import bcrypt from 'bcryptjs';
import { createCluster, initSecretPassword } from '../../lib/cluster/create.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { readState, writeState } from '../../lib/workspace/state.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { MeasuringMemoryProvider, MemoryProvider } from './support/stand-in.js';
import { IMAGE_MEASUREMENTS, localWorkspace } from './support/workspace.js';

describe('createCluster', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await localWorkspace();
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  const create = (provider: MemoryProvider) => createCluster({ workspaceDir: ws, provider, journal: new MemoryResourceJournal(), log: nullLogger });

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
    assert.ok(!JSON.stringify(request).includes(state.infrastructure.initSecret), 'the plain init secret never goes to the provider');
    assert.ok(await bcrypt.compare(initSecretPassword(Buffer.from(state.infrastructure.initSecret, 'hex')), request.initSecretHash));
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
