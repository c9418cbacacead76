import assert from 'node:assert/strict';
import { clusterStatus, summarizeStatus } from '../../cli/cluster/status.js';
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
    clusterStatus({ workspaceDir: '/nowhere', provider, journal: new MemoryResourceJournal(), log: nullLogger, port: node.port, clusterId });
  const one = async (state: string, reason = '', clusterId = '') => {
    provider.instances = [instance('worker-0', 'worker')];
    answer = { name: 'worker-0', role: 'worker', state, reason, clusterId };
    return (await status('aa'.repeat(32))).nodes[0];
  };

  it('maps what the bootstrapper reports: initialized and joined are joined, refused keeps the reason', async () => {
    const { name, role, address, state } = await one('initialized', '', 'aa'.repeat(32));
    assert.deepEqual({ name, role, address, state }, { name: 'worker-0', role: 'worker', address: '127.0.0.1', state: 'joined' });
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

  it('unreachable bootstrappers and stopped instances', async () => {
    provider.instances = [instance('worker-0', 'worker', 'stopped'), { ...instance('worker-1', 'worker'), privateIp: '127.0.0.1' }];
    answer = { name: 'w', role: 'worker', state: 'joined', reason: '', clusterId: '' };
    const closed = await clusterStatus({ workspaceDir: '/nowhere', provider, journal: new MemoryResourceJournal(), log: nullLogger, port: 1, timeoutMs: 500 });
    assert.deepEqual(
      closed.nodes.map((n) => n.state),
      ['stopped', 'unreachable'],
    );
    assert.match(closed.nodes[1].reason ?? '', /does not answer/);
    assert.equal(summarizeStatus(closed), '0 of 2 nodes joined; 1 stopped, 1 unreachable');
  });

  it('compares what each node runs with what the config asks for, and carries the last attestation', async () => {
    provider.instances = [instance('worker-0', 'worker')];
    const expected = { image: 'v2', measurementsDigest: 'aaaaaaaaaaaa', kubernetesVersion: 'v1.32.10', microserviceVersion: 'v0.1.0', attestationVariant: 'local-vtpm' };
    const runs = { imageVersion: 'v2', imageMeasurementsDigest: 'aaaaaaaaaaaa', kubernetesVersion: 'v1.32.10', microserviceVersion: 'v0.1.0', attestationVariant: 'local-vtpm' };
    const lastAttestation = { result: 'accepted', time: '2026-11-24T00:00:00.000Z', verifier: 'the join service at 127.0.4.1:30090', reason: '' };
    answer = { name: 'worker-0', role: 'worker', state: 'joined', ...runs, lastAttestation };
    const current = await clusterStatus({ workspaceDir: '/nowhere', provider, journal: new MemoryResourceJournal(), log: nullLogger, port: node.port, expected });
    assert.deepEqual(current.nodes[0].software, { image: 'v2', measurementsDigest: 'aaaaaaaaaaaa', kubernetesVersion: 'v1.32.10', microserviceVersion: 'v0.1.0', attestationVariant: 'local-vtpm' });
    assert.equal(current.nodes[0].upToDate, true);
    assert.deepEqual(current.nodes[0].lastAttestation, { result: 'accepted', time: lastAttestation.time, verifier: lastAttestation.verifier });
    assert.equal(summarizeStatus(current), '1 of 1 node joined; 1 of 1 up to date with the config');

    answer = { ...answer, imageVersion: 'v1', imageMeasurementsDigest: 'bbbbbbbbbbbb' };
    const old = await clusterStatus({ workspaceDir: '/nowhere', provider, journal: new MemoryResourceJournal(), log: nullLogger, port: node.port, expected });
    assert.equal(old.nodes[0].upToDate, false);
    assert.deepEqual(old.nodes[0].outdated, ['image v1, config v2', 'measurementsDigest bbbbbbbbbbbb, config aaaaaaaaaaaa']);
  });
});
