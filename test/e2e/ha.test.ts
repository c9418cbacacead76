/**
 * A highly available control plane on a real local cluster (3 control planes + 2 workers: etcd, gocryptfs, swtpm,
 * node processes): the cluster store on every control plane, new measurements written once and applied by every join
 * service, one control plane killed (the others go on, it comes back and catches up), two of three killed (no quorum:
 * joins are refused and get nothing; one brought back with `recover`, joins work again, nothing lost).
 * The cases share one cluster and run in order.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { openWorkspaceStore } from '../../cli/cluster/store.js';
import { BOOT_HISTORY_FILE } from '../../bootstrapper/node-setup.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { nodePaths } from '../../providers/local/layout.js';
import { findOwnedProcesses } from '../../providers/local/processes.js';
import { cleanUp, copyBuiltCli, run, startProbeNode, status, tempDir, waitFor, type CliCopy } from './support.js';

interface StoreStatus {
  healthyVoters: number;
  voters: number;
  quorum: boolean;
  members: { name: string; healthy: boolean }[];
}

describe('e2e: a highly available control plane (3 control planes + 2 workers)', function () {
  this.timeout(240_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;

  const node = async (name: string) => (await status(copy, ws)).find((n) => n.name === name);
  const storeStatus = async (): Promise<StoreStatus> => {
    const res = await run(copy, ws, ['status', '--json']);
    assert.equal(res.code, 0, res.stderr);
    return (JSON.parse(res.stdout) as { store: StoreStatus }).store;
  };
  /** Power cut: every process of the node dies at once (bootstrapper, etcd, gocryptfs, swtpm). */
  const kill = async (name: string) => {
    for (const pid of await findOwnedProcesses(nodePaths(ws, name).dir)) process.kill(pid, 'SIGKILL');
    await waitFor(
      `${name}'s processes to be gone`,
      async () => (await findOwnedProcesses(nodePaths(ws, name).dir)).length === 0,
    );
  };
  const bootHistory = async (name: string) =>
    (await fs.readFile(path.join(nodePaths(ws, name).stateDir, BOOT_HISTORY_FILE), 'utf8')).trim().split('\n').length;

  before(async () => {
    tmp = await tempDir('cl-ha-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    const res = await run(copy, ws, ['mini', 'up', '-c', '3', '-w', '2']);
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('every node joined; status shows three healthy etcd members and the quorum', async () => {
    assert.ok((await status(copy, ws)).every((n) => n.state === 'joined'));
    const store = await storeStatus();
    assert.deepEqual([store.healthyVoters, store.voters, store.quorum], [3, 3, true]);
    assert.deepEqual(store.members.map((m) => m.name).sort(), [
      'control-plane-0',
      'control-plane-1',
      'control-plane-2',
    ]);
    const text = await run(copy, ws, ['status']);
    assert.match(text.stdout, /Cluster store \(etcd\): 3 of 3 members healthy, quorum/);
  });

  it('a measurement written once to the store takes effect on every join service at once: the old image is refused by all three', async () => {
    const probe = await startProbeNode(
      ws,
      { imageDir: copy.imageDir, entry: copy.entry },
      'probe-0',
      path.join(tmp, 'probe-tpm'),
    );
    try {
      const controlPlanes = (await status(copy, ws)).filter((n) => n.role === 'control-plane');
      const ask = (address: string) => probe.join(`${address}:30090`);
      for (const cp of controlPlanes)
        assert.equal((await ask(cp.address)).error, undefined, `${cp.name} accepts the current image`);

      const measurements = measurementsOf(await loadConfig(ws));
      const store = await openWorkspaceStore(ws);
      try {
        // Written straight to the store (the CLI writes only verified sets): what matters is every join service's reaction.
        const write = (m: typeof measurements) =>
          store.writeJoinConfig({ attestation: { variant: 'local-vtpm', config: { measurements: m } } });
        await write({ ...measurements, 9: { expected: 'ab'.repeat(32), warnOnly: false } });
        // No wait: the very next request of every join service reads the new measurements.
        for (const cp of controlPlanes) {
          const attempt = await ask(cp.address);
          assert.match(attempt.error?.message ?? '', /PCR 9: expected abab/, `${cp.name} still accepts the old image`);
          assert.ok(!attempt.responses.includes('sealedTicket'));
        }
        await write(measurements);
      } finally {
        await store.close();
      }
      for (const cp of controlPlanes)
        assert.equal((await ask(cp.address)).error, undefined, `${cp.name} accepts it again`);
    } finally {
      await probe.close();
    }
  });

  it('one control plane killed: a worker rebooted right after rejoins; status shows the node down and etcd 2 of 3; started again, it rejoins and its member catches up', async () => {
    await kill('control-plane-0');
    const joinsBefore = await bootHistory('worker-0');
    assert.equal((await run(copy, ws, ['mini', 'reboot', 'worker-0'])).code, 0);
    await waitFor(
      'worker-0 to rejoin',
      async () => (await node('worker-0'))?.state === 'joined' && (await bootHistory('worker-0')) === joinsBefore + 1,
      30_000,
    );
    assert.equal((await node('control-plane-0'))?.state, 'stopped');
    const degraded = await storeStatus();
    assert.deepEqual([degraded.healthyVoters, degraded.voters, degraded.quorum], [2, 3, true]);
    assert.equal(degraded.members.find((m) => m.name === 'control-plane-0')?.healthy, false);

    assert.equal((await run(copy, ws, ['mini', 'start', 'control-plane-0'])).code, 0);
    await waitFor('control-plane-0 to rejoin', async () => (await node('control-plane-0'))?.state === 'joined', 30_000);
    await waitFor('its etcd member to be healthy again', async () => (await storeStatus()).healthyVoters === 3, 30_000);
  });

  it('two of three killed: a node gets "the control plane has no quorum" and no ticket; one back with recover, joins work again and nothing is lost', async () => {
    await kill('control-plane-1');
    await kill('control-plane-2');
    const before = await bootHistory('worker-1');
    assert.equal((await run(copy, ws, ['mini', 'reboot', 'worker-1'])).code, 0);
    const waiting = await waitFor(
      'worker-1 to be told',
      async () => {
        const n = await node('worker-1');
        return n?.reason?.includes('the control plane has no quorum') ? n : undefined;
      },
      30_000,
    );
    assert.equal(waiting.state, 'waiting');
    const log = await fs.readFile(nodePaths(ws, 'worker-1').log, 'utf8');
    assert.match(log, /The control plane has no quorum: the cluster store cannot answer/);
    assert.equal(await bootHistory('worker-1').catch(() => before), before, 'no rejoin: no disk key reached the node');

    assert.equal((await run(copy, ws, ['mini', 'start', 'control-plane-1'])).code, 0);
    await waitFor(
      'control-plane-1 to await recovery',
      async () => (await node('control-plane-1'))?.state === 'awaiting-recovery',
      30_000,
    );
    const recover = await run(copy, ws, ['recover']);
    assert.match(recover.stdout, /^recovered control-plane-1$/m, recover.stdout + recover.stderr);
    await waitFor('worker-1 to rejoin', async () => (await node('worker-1'))?.state === 'joined', 30_000);
    assert.equal(await bootHistory('worker-1'), before + 1);
    const store = await storeStatus();
    assert.deepEqual([store.healthyVoters, store.quorum], [2, true]);
    // What the cluster knew survives: the join configuration is still there (a node can still be verified).
    assert.equal((await run(copy, ws, ['verify', '-e', (await node('worker-1'))!.address])).code, 0);
  });
});
