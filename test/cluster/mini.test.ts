import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { miniDown, miniUp, type MiniStep, type MiniUpOptions } from '../../cli/cluster/mini.js';
import { generateConfigFiles, loadConfig } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { pollUntil } from '../../lib/poll.js';
import { CONFIG_FILE, DEBUG_LOG_FILE, MASTER_SECRET_FILE, STATE_FILE } from '../../lib/workspace/files.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { UserError } from '../../lib/errors.js';
import type { CreateRequest, CreateResult, ProviderContext } from '../../providers/contract.js';
import type { NodeStatus } from '../../proto/gen/constellation/verify.js';
import {
  MeasuringMemoryProvider,
  StandInIssuer,
  standInValidatorFactory,
  startStandInNode,
  type StandInNode,
} from './support/stand-in.js';
import { IMAGE_MEASUREMENTS, NODE_PCRS, tempDir } from './support/workspace.js';

describe('miniUp and miniDown', () => {
  let ws: string;
  let node: StandInNode;
  let provider: MeasuringMemoryProvider;
  let answer: Partial<NodeStatus>;
  const joined: Partial<NodeStatus> = { name: 'n', role: 'worker', state: 'joined', reason: '', clusterId: '' };

  beforeEach(async () => {
    ws = await tempDir();
    provider = new MeasuringMemoryProvider(IMAGE_MEASUREMENTS);
    answer = joined;
    node = await startStandInNode({ issuer: new StandInIssuer(NODE_PCRS), status: () => answer });
  });
  afterEach(async () => {
    await node.close();
    await fs.rm(ws, { recursive: true, force: true });
  });

  const up = (extra: Partial<MiniUpOptions> = {}) =>
    miniUp({
      workspaceDir: ws,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      provider,
      init: { createValidator: standInValidatorFactory, validatorDeps: {}, port: node.port },
      statusPort: node.port,
      pollIntervalMs: 10,
      ...extra,
    });

  it('writes a local config with the node counts, creates, initializes and waits until every node joined', async () => {
    const steps: MiniStep[] = [];
    const result = await up({
      controlPlanes: 1,
      workers: 2,
      progress: (step, message) => message === undefined && steps.push(step),
    });
    assert.deepEqual(steps, ['config', 'create', 'init', 'join']);
    const config = await loadConfig(ws);
    assert.equal(config.nodeGroups.control_plane_default.initialCount, 1);
    assert.equal(config.nodeGroups.worker_default.initialCount, 2);
    assert.deepEqual(
      provider.requests[0].nodeGroups.map((g) => g.initialCount),
      [1, 2],
    );
    assert.equal(result.nodes.length, 3);
    assert.equal(result.continued, false);
    assert.match(result.clusterId, /^[0-9a-f]{64}$/);
  });

  it('run again, continues the earlier cluster: no second create, no second init, the same master secret', async () => {
    const first = await up({ workers: 2 });
    const secret = await fs.readFile(path.join(ws, MASTER_SECRET_FILE));
    const steps: MiniStep[] = [];
    const second = await up({ progress: (step, message) => message === undefined && steps.push(step) });
    assert.equal(second.continued, true);
    assert.equal(second.clusterId, first.clusterId);
    assert.deepEqual(steps, ['config', 'init', 'join']);
    assert.equal(provider.requests.length, 1);
    assert.equal(node.received.length, 1);
    assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);
  });

  it('names refused nodes and their reasons', async () => {
    answer = { ...joined, state: 'refused', reason: 'PCR 9: expected 09…, got ee… (enforced)' };
    await assert.rejects(up(), (err: Error & { hint?: string }) => {
      assert.match(err.message, /Not every node joined the cluster \(0 of 2 nodes joined; 2 refused\)/);
      assert.match(err.message, /worker-0: refused \(PCR 9: expected/);
      assert.match(err.hint ?? '', /constellation status/);
      return true;
    });
  });

  /** A provider whose create returns with its workers still starting, until the test settles `workers`. */
  class StartingWorkersProvider extends MeasuringMemoryProvider {
    readonly events: string[] = [];
    settle!: { resolve: () => void; reject: (err: Error) => void };
    override async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
      if (ctx.whileControlPlanesBoot) this.events.push('told create what to do while the control planes boot');
      const result = await super.create(request, ctx);
      const workersStarting = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
      return { ...result, ...(request.returnWhenControlPlanesUp ? { workersStarting } : {}) };
    }
    async markInitialized(): Promise<void> {
      this.events.push('marked initialized');
    }
  }

  it('initializes while the workers start, marks the cluster initialized only once they are up, and then waits for the joins', async () => {
    const starting = new StartingWorkersProvider(IMAGE_MEASUREMENTS);
    provider = starting;
    const result = up({ workers: 2 });
    await pollUntil(() => node.received.length === 1 || undefined, { timeoutMs: 5000, intervalMs: 5, what: 'init' });
    starting.events.push('workers up');
    starting.settle.resolve();
    assert.equal((await result).nodes.length, 3);
    assert.equal(starting.requests[0].returnWhenControlPlanesUp, true);
    assert.deepEqual(starting.events, [
      'told create what to do while the control planes boot',
      'workers up',
      'marked initialized',
    ]);
  });

  it('fails naming a worker that did not start, with what to do, after the cluster was initialized', async () => {
    const starting = new StartingWorkersProvider(IMAGE_MEASUREMENTS);
    provider = starting;
    const result = up({ workers: 2 });
    await pollUntil(() => node.received.length === 1 || undefined, { timeoutMs: 5000, intervalMs: 5, what: 'init' });
    starting.settle.reject(
      new UserError('Local node worker-1 did not boot: exited (code 1)', { hint: 'See its log: /x/node.log' }),
    );
    await assert.rejects(result, (err: Error & { hint?: string }) => {
      assert.equal(err.message, 'A worker did not start: Local node worker-1 did not boot: exited (code 1)');
      assert.match(err.hint ?? '', /^See its log: \/x\/node\.log\. Run `constellation mini up` again to start it/);
      return true;
    });
    assert.deepEqual(
      starting.events,
      ['told create what to do while the control planes boot', 'marked initialized'],
      'the cluster is initialized: no node added later serves Init',
    );
  });

  it('run again on an initialized cluster, starts every node first (a worker may never have started)', async () => {
    class PoweredProvider extends MeasuringMemoryProvider {
      started: string[][] = [];
      async nodeNames(): Promise<string[]> {
        return this.instances.map((i) => i.name);
      }
      async startNodes(names: string[]): Promise<void> {
        this.started.push(names);
      }
      async stopNodes(): Promise<void> {}
      async rebootNodes(): Promise<void> {}
    }
    const powered = new PoweredProvider(IMAGE_MEASUREMENTS);
    provider = powered;
    await up({ workers: 2 });
    assert.deepEqual(powered.started, [], 'a new cluster is started by create');
    await up();
    assert.deepEqual(powered.started, [['control-plane-0', 'worker-0', 'worker-1']]);
  });

  it('refuses a workspace of a cloud config, and a different size for a cluster already started', async () => {
    const cloud = await tempDir();
    try {
      await generateConfigFiles(cloud, 'gcp');
      await assert.rejects(
        up({ workspaceDir: cloud }),
        /config for the gcp provider; mini up runs local clusters only/,
      );
    } finally {
      await fs.rm(cloud, { recursive: true, force: true });
    }
    await up();
    await assert.rejects(up({ workers: 3 }), (err: Error & { hint?: string }) => {
      assert.match(err.message, /was started with 1 control-plane and 1 worker nodes/);
      assert.match(err.hint ?? '', /mini down/);
      return true;
    });
  });

  it('mini down terminates and removes the files mini up made, the master secret included', async () => {
    await up();
    await fs.writeFile(path.join(ws, DEBUG_LOG_FILE), '{}\n');
    const { removedFiles } = await miniDown({
      workspaceDir: ws,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      provider,
    });
    assert.equal(provider.terminated, 1);
    for (const name of [CONFIG_FILE, STATE_FILE, MASTER_SECRET_FILE])
      assert.ok(removedFiles.includes(path.join(ws, name)), name);
    assert.deepEqual(await fs.readdir(ws), [DEBUG_LOG_FILE]);
  });
});
