import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  clusterStatus,
  configuredSoftware,
  expectedForStatus,
  NodeStatusConnections,
  summarizeStatus,
} from '../../cli/cluster/status.js';
import { NodeLock } from '../../bootstrapper/node-lock.js';
import { NodeStatusTracker } from '../../bootstrapper/node-status.js';
import { createVerifyService } from '../../bootstrapper/verify-server.js';
import { defaultConfig } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import type { Instance } from '../../providers/contract.js';
import type { NodeStatus } from '../../proto/gen/constellation/verify.js';
import { MemoryProvider, StandInIssuer, startStandInNode, type StandInNode } from './support/stand-in.js';

describe('clusterStatus', () => {
  let node: StandInNode;
  let answer: Partial<NodeStatus>;
  const provider = new MemoryProvider();
  const instance = (name: string, role: Instance['role'], state: Instance['state'] = 'running'): Instance => ({
    id: name,
    name,
    role,
    nodeGroup: role === 'worker' ? 'worker_default' : 'control_plane_default',
    privateIp: '127.0.0.1',
    state,
  });

  before(async () => {
    node = await startStandInNode({ issuer: new StandInIssuer({}), status: () => answer });
  });
  after(async () => {
    await node.close();
  });

  const status = (clusterId?: string) =>
    clusterStatus({
      workspaceDir: '/nowhere',
      provider,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      port: node.port,
      clusterId,
    });
  const one = async (state: string, reason = '', clusterId = '') => {
    provider.instances = [instance('worker-0', 'worker')];
    answer = { name: 'worker-0', role: 'worker', state, reason, clusterId };
    return (await status('aa'.repeat(32))).nodes[0];
  };

  it('maps what the bootstrapper reports: initialized and joined are joined, refused keeps the reason', async () => {
    const { name, role, address, state } = await one('initialized', '', 'aa'.repeat(32));
    assert.deepEqual(
      { name, role, address, state },
      { name: 'worker-0', role: 'worker', address: '127.0.0.1', state: 'joined' },
    );
    assert.equal((await one('joined', '', 'aa'.repeat(32))).state, 'joined');
    assert.equal((await one('joining')).state, 'joining');
    assert.equal((await one('waiting')).state, 'waiting');
    const refused = await one('refused', 'PCR 9: expected 00, got 11 (enforced)');
    assert.deepEqual([refused.state, refused.reason], ['refused', 'PCR 9: expected 00, got 11 (enforced)']);
    assert.equal((await one('awaiting-recovery', 'no join service answers')).state, 'awaiting-recovery');
    assert.equal((await one('failed', 'disk broke')).reason, 'disk broke');
  });

  it('a node that reports another clusterID is not part of this cluster', async () => {
    const entry = await one('joined', '', 'bb'.repeat(32));
    assert.equal(entry.state, 'failed');
    assert.match(entry.reason ?? '', /another cluster/);
  });

  it('a node whose answer the caller settled is not asked again', async () => {
    provider.instances = [instance('worker-0', 'worker'), instance('worker-1', 'worker')];
    let asked = 0;
    answer = { name: 'w', role: 'worker', state: 'joining', reason: '', clusterId: '' };
    const counting = await startStandInNode({ issuer: new StandInIssuer({}), status: () => (asked++, answer) });
    try {
      const settled = new Map([
        ['worker-0', { name: 'worker-0', role: 'worker', address: '127.0.0.1', state: 'joined' as const }],
      ]);
      const result = await clusterStatus({
        workspaceDir: '/nowhere',
        provider,
        journal: new MemoryResourceJournal(),
        log: nullLogger,
        port: counting.port,
        settled,
      });
      assert.deepEqual(
        result.nodes.map((n) => [n.name, n.state]),
        [
          ['worker-0', 'joined'],
          ['worker-1', 'joining'],
        ],
      );
      assert.equal(asked, 1);
    } finally {
      await counting.close();
    }
  });

  it('connections kept across calls ask every node over one connection, and close ends them', async () => {
    provider.instances = [instance('worker-0', 'worker')];
    const peers: string[] = [];
    answer = { name: 'w', role: 'worker', state: 'joining', reason: '', clusterId: '' };
    const counting = await startStandInNode({
      issuer: new StandInIssuer({}),
      status: (peer) => (peers.push(peer), answer),
    });
    const connections = new NodeStatusConnections();
    try {
      const ask = () =>
        clusterStatus({
          workspaceDir: '/nowhere',
          provider,
          journal: new MemoryResourceJournal(),
          log: nullLogger,
          port: counting.port,
          connections,
        });
      assert.equal((await ask()).nodes[0]?.state, 'joining');
      answer = { ...answer, state: 'joined' };
      assert.equal((await ask()).nodes[0]?.state, 'joined');
      assert.equal(peers.length, 2);
      assert.equal(new Set(peers).size, 1, `one connection, not ${peers.join(', ')}`);
    } finally {
      await connections.close();
      await counting.close();
    }
  });

  it("connections long-poll: a bootstrapper answers the next question when the node's state changes", async () => {
    provider.instances = [instance('worker-0', 'worker')];
    const lock = new NodeLock();
    const tracker = new NodeStatusTracker('worker-0', 'worker', { lock });
    const issuer = new StandInIssuer({});
    const bootstrapper = await startStandInNode({ issuer, getStatus: createVerifyService(issuer, tracker).getStatus });
    const connections = new NodeStatusConnections();
    const ask = async () => {
      const started = Date.now();
      const { state } = (
        await clusterStatus({
          workspaceDir: '/nowhere',
          provider,
          journal: new MemoryResourceJournal(),
          log: nullLogger,
          port: bootstrapper.port,
          connections,
        })
      ).nodes[0];
      return { state, ms: Date.now() - started };
    };
    try {
      assert.equal((await ask()).state, 'waiting', 'the first question is answered at once');
      setTimeout(() => tracker.set('joining', {}, lock.tryLock('join')!), 300);
      const changed = await ask();
      assert.equal(changed.state, 'joining');
      assert.ok(changed.ms >= 250 && changed.ms < 900, `answered at the change, after ${changed.ms} ms`);
      const unchanged = await ask();
      assert.equal(unchanged.state, 'joining');
      assert.ok(unchanged.ms >= 900, `held until the wait ended: ${unchanged.ms} ms`);
    } finally {
      await connections.close();
      await bootstrapper.close();
    }
  });

  it('unreachable bootstrappers and stopped instances', async () => {
    provider.instances = [
      instance('worker-0', 'worker', 'stopped'),
      { ...instance('worker-1', 'worker'), privateIp: '127.0.0.1' },
    ];
    answer = { name: 'w', role: 'worker', state: 'joined', reason: '', clusterId: '' };
    const closed = await clusterStatus({
      workspaceDir: '/nowhere',
      provider,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      port: 1,
      timeoutMs: 500,
    });
    assert.deepEqual(
      closed.nodes.map((n) => n.state),
      ['stopped', 'unreachable'],
    );
    assert.match(closed.nodes[1].reason ?? '', /does not answer/);
    assert.equal(summarizeStatus(closed), '0 of 2 nodes joined; 1 stopped, 1 unreachable');
  });

  it('compares what each node runs with what the config asks for, and carries the last attestation', async () => {
    provider.instances = [instance('worker-0', 'worker')];
    const expected = {
      image: 'v2',
      measurementsDigest: 'aaaaaaaaaaaa',
      kubernetesVersion: 'v1.32.10',
      microserviceVersion: 'v0.1.0',
      attestationVariant: 'local-vtpm',
    };
    const runs = {
      imageVersion: 'v2',
      imageMeasurementsDigest: 'aaaaaaaaaaaa',
      kubernetesVersion: 'v1.32.10',
      microserviceVersion: 'v0.1.0',
      attestationVariant: 'local-vtpm',
    };
    const lastAttestation = {
      result: 'accepted',
      time: '2026-11-24T00:00:00.000Z',
      verifier: 'the join service at 127.0.4.1:30090',
      reason: '',
    };
    answer = { name: 'worker-0', role: 'worker', state: 'joined', ...runs, lastAttestation };
    const current = await clusterStatus({
      workspaceDir: '/nowhere',
      provider,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      port: node.port,
      expected,
    });
    assert.deepEqual(current.nodes[0].software, {
      image: 'v2',
      measurementsDigest: 'aaaaaaaaaaaa',
      kubernetesVersion: 'v1.32.10',
      microserviceVersion: 'v0.1.0',
      attestationVariant: 'local-vtpm',
    });
    assert.equal(current.nodes[0].upToDate, true);
    assert.deepEqual(current.nodes[0].lastAttestation, {
      result: 'accepted',
      time: lastAttestation.time,
      verifier: lastAttestation.verifier,
    });
    assert.equal(summarizeStatus(current), '1 of 1 node joined; 1 of 1 up to date with the config');

    answer = { ...answer, imageVersion: 'v1', imageMeasurementsDigest: 'bbbbbbbbbbbb' };
    const old = await clusterStatus({
      workspaceDir: '/nowhere',
      provider,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      port: node.port,
      expected,
    });
    assert.equal(old.nodes[0].upToDate, false);
    assert.deepEqual(old.nodes[0].outdated, [
      'image v1, config v2',
      'measurementsDigest bbbbbbbbbbbb, config aaaaaaaaaaaa',
    ]);
  });

  it('a qemu config whose image is a folder: a node is up to date when it reports the version of the image in that folder', async () => {
    const ws = await fs.mkdtemp(path.join(os.tmpdir(), 'status-qemu-'));
    try {
      await fs.mkdir(path.join(ws, 'images', 'v2'), { recursive: true });
      await fs.writeFile(path.join(ws, 'images', 'v2', 'constellation-qemu-v0.0.2-test.raw'), '');
      const config = { ...defaultConfig('qemu'), image: './images/v2' };
      const expected = await expectedForStatus(config, ws);
      assert.deepEqual([expected.image, expected.imageVersion], ['./images/v2', 'v0.0.2-test']);
      assert.equal(
        (await configuredSoftware({ ...config, image: 'vm-0123456789ab' }, ws)).imageVersion,
        undefined,
        'a store version is what the node reports',
      );

      provider.instances = [instance('worker-0', 'worker')];
      const runs = {
        imageVersion: 'v0.0.2-test',
        imageMeasurementsDigest: expected.measurementsDigest,
        kubernetesVersion: '',
        microserviceVersion: expected.microserviceVersion,
        attestationVariant: 'qemu-vtpm',
      };
      answer = { name: 'worker-0', role: 'worker', state: 'joined', ...runs };
      const current = await clusterStatus({
        workspaceDir: ws,
        provider,
        journal: new MemoryResourceJournal(),
        log: nullLogger,
        port: node.port,
        expected,
      });
      assert.equal(current.nodes[0].upToDate, true, JSON.stringify(current.nodes[0].outdated));

      answer = { ...answer, imageVersion: 'v0.0.1-test' };
      const old = await clusterStatus({
        workspaceDir: ws,
        provider,
        journal: new MemoryResourceJournal(),
        log: nullLogger,
        port: node.port,
        expected,
      });
      assert.deepEqual(old.nodes[0].outdated, ['image v0.0.1-test, config v0.0.2-test']);
    } finally {
      await fs.rm(ws, { recursive: true, force: true });
    }
  });
});
