/**
 * A control plane's side of the in-place Kubernetes upgrade (bootstrapper/kubernetes-upgrade.ts): several agents on
 * one memory cluster store, each with a fake backend that records what it was asked to run, on a fixed clock and
 * without real sleeps. The kubeadm commands themselves are tested against the stand-in (kubernetes/backend.test.ts).
 */
import assert from 'node:assert/strict';
import { KubernetesUpgradeAgent, type KubernetesUpgradeAgentOptions } from '../../bootstrapper/kubernetes-upgrade.js';
import type { ControlPlaneUpgradeParams } from '../../bootstrapper/kubernetes/backend.js';
import { NodeLock } from '../../bootstrapper/node-lock.js';
import { NodeStatusTracker } from '../../bootstrapper/node-status.js';
import { MemoryClusterStore } from '../../lib/cluster-store/memory.js';
import type { KubernetesUpgrade } from '../../lib/cluster-store/types.js';
import { UserError } from '../../lib/errors.js';
import { createLogger } from '../../lib/logging/index.js';

const NOW = new Date('2030-01-02T03:04:05.000Z');

function request(over: Partial<KubernetesUpgrade> = {}): KubernetesUpgrade {
  return { version: 'v1.33.6', from: 'v1.32.10', requestedAt: NOW.toISOString(), nodes: {}, ...over };
}

/** A control plane: its agent, what its backend ran, the versions it kept, its status and its log. */
function controlPlane(
  store: MemoryClusterStore,
  name: string,
  options: { runs?: string; fail?: string; agent?: Partial<KubernetesUpgradeAgentOptions> } = {},
) {
  const ran: Array<Pick<ControlPlaneUpgradeParams, 'version' | 'from' | 'first'>> = [];
  const kept: string[] = [];
  const log: string[] = [];
  const status = new NodeStatusTracker(name, 'control-plane', {
    lock: new NodeLock(),
    software: { kubernetesVersion: options.runs ?? 'v1.32.10' },
  });
  let closed = 0;
  const agent = new KubernetesUpgradeAgent({
    nodeName: name,
    openStore: async () => ({
      readKubernetesUpgrade: () => store.readKubernetesUpgrade(),
      swapKubernetesUpgrade: (upgrade, revision) => store.swapKubernetesUpgrade(upgrade, revision),
      close: async () => void closed++,
    }),
    backend: {
      name: 'none',
      upgradeControlPlane: async (p) => {
        ran.push({ version: p.version, from: p.from, first: p.first });
        if (options.fail) throw new UserError(options.fail);
        return { message: `${p.nodeName} now runs ${p.version}` };
      },
    },
    status,
    keepVersion: async (version) => void kept.push(version),
    logger: createLogger((line) => log.push(line)),
    clock: () => NOW,
    ...options.agent,
  });
  return { agent, ran, kept, log, status, closed: () => closed };
}

describe('bootstrapper/kubernetes-upgrade', () => {
  let store: MemoryClusterStore;
  beforeEach(() => (store = new MemoryClusterStore()));
  const record = async () => (await store.readKubernetesUpgrade())?.upgrade;

  it('does nothing while the store holds no upgrade record', async () => {
    const cp = controlPlane(store, 'control-plane-0');
    assert.equal(await cp.agent.step(), 'no-upgrade');
    assert.deepEqual(cp.ran, []);
  });

  it('exactly one of three control planes claims the cluster-wide step and runs it first; the others wait for it, then follow', async () => {
    await store.swapKubernetesUpgrade(request(), undefined);
    const cps = ['control-plane-0', 'control-plane-1', 'control-plane-2'].map((name) => controlPlane(store, name));
    const firstPass = await Promise.all(cps.map((cp) => cp.agent.step()));
    assert.equal(firstPass.filter((step) => step === 'applied').length, 1, firstPass.join(', '));
    assert.ok(
      firstPass.every((step) => ['applied', 'claim-lost', 'waiting'].includes(step)),
      firstPass.join(', '),
    );
    const first = cps[firstPass.indexOf('applied')]!;
    const others = cps.filter((cp) => cp !== first);
    assert.deepEqual(first.ran, [{ version: 'v1.33.6', from: 'v1.32.10', first: true }]);
    assert.deepEqual((await record())?.first, first.status.get().name);
    assert.equal((await record())?.applied, true);

    assert.deepEqual(await Promise.all(others.map((cp) => cp.agent.step())), ['followed', 'followed']);
    for (const cp of others) assert.deepEqual(cp.ran, [{ version: 'v1.33.6', from: 'v1.32.10', first: false }]);
    for (const cp of cps) {
      assert.equal(cp.status.get().kubernetesVersion, 'v1.33.6', 'the node reports the new version');
      assert.deepEqual(cp.kept, ['v1.33.6'], 'and keeps it on its state disk');
    }
    assert.deepEqual(
      (await record())?.nodes,
      Object.fromEntries(cps.map((cp) => [cp.status.get().name, { result: 'upgraded', at: NOW.toISOString() }])),
    );
    assert.deepEqual(
      await Promise.all(cps.map((cp) => cp.agent.step())),
      ['up-to-date', 'up-to-date', 'up-to-date'],
      'nothing runs twice',
    );
    assert.equal(cps.flatMap((cp) => cp.ran).length, 3);
  });

  it('a control plane waits while the first has not applied', async () => {
    await store.swapKubernetesUpgrade(request({ first: 'control-plane-0' }), undefined);
    const cp = controlPlane(store, 'control-plane-1');
    assert.equal(await cp.agent.step(), 'waiting');
    assert.deepEqual(cp.ran, []);
    assert.equal(cp.status.get().kubernetesVersion, 'v1.32.10');
  });

  it('the first, back after a crash during its upgrade apply, runs it again', async () => {
    await store.swapKubernetesUpgrade(request({ first: 'control-plane-0' }), undefined);
    const cp = controlPlane(store, 'control-plane-0');
    assert.equal(await cp.agent.step(), 'applied');
    assert.deepEqual(cp.ran, [{ version: 'v1.33.6', from: 'v1.32.10', first: true }]);
    assert.equal((await record())?.applied, true);
  });

  it('a control plane that runs the version already (upgraded before a crash, or joined at it) only makes the record say so', async () => {
    await store.swapKubernetesUpgrade(request({ first: 'control-plane-0' }), undefined);
    const cp = controlPlane(store, 'control-plane-0', { runs: 'v1.33.6' });
    assert.equal(await cp.agent.step(), 'up-to-date');
    assert.deepEqual(cp.ran, []);
    assert.deepEqual(
      await record(),
      request({
        first: 'control-plane-0',
        applied: true,
        nodes: { 'control-plane-0': { result: 'upgraded', at: NOW.toISOString() } },
      }),
    );
  });

  it('a failure is logged and recorded with its reason for the CLI, and not tried again until the CLI asks again', async () => {
    await store.swapKubernetesUpgrade(request(), undefined);
    const reason =
      "kubeadm upgrade apply failed with exit code 1:\n[upgrade/apply] FATAL: couldn't upgrade control plane.";
    const cp = controlPlane(store, 'control-plane-0', { fail: reason });
    assert.equal(await cp.agent.step(), 'failed');
    assert.deepEqual((await record())?.nodes, {
      'control-plane-0': { result: 'failed', reason, at: NOW.toISOString() },
    });
    assert.equal((await record())?.applied, undefined);
    assert.deepEqual([cp.kept, cp.status.get().kubernetesVersion], [[], 'v1.32.10'], 'the old version stays');
    assert.ok(
      cp.log.some(
        (line) => line.includes('the Kubernetes upgrade to v1.33.6 failed') && line.includes('FATAL: couldn'),
      ),
    );
    assert.equal(await cp.agent.step(), 'failed-before');
    assert.equal(cp.ran.length, 1);
  });

  it('follows the record on its own every poll interval, logs an unavailable store once, and stops on close', async () => {
    store.available = false;
    const sleeps: number[] = [];
    let passes = 0;
    let upgraded!: () => void;
    const done = new Promise<void>((resolve) => (upgraded = resolve));
    const cp = controlPlane(store, 'control-plane-0', {
      agent: {
        pollIntervalMs: 1234,
        sleep: async (ms) => {
          sleeps.push(ms);
          if (++passes === 3) {
            store.available = true;
            await store.swapKubernetesUpgrade(request(), undefined);
          }
          if (cp.status.get().kubernetesVersion === 'v1.33.6') upgraded();
          await new Promise((resolve) => setImmediate(resolve));
        },
      },
    });
    const { agent } = cp;
    agent.start();
    await done;
    await agent.close();
    assert.deepEqual(cp.ran, [{ version: 'v1.33.6', from: 'v1.32.10', first: true }]);
    assert.ok(sleeps.length >= 4 && sleeps.every((ms) => ms === 1234));
    assert.equal(
      cp.log.filter((line) => line.includes('cannot follow the Kubernetes upgrade record')).length,
      1,
      'one warning for repeated failures',
    );
    assert.equal(cp.closed(), 1, 'its store client is closed');
    const after = passes;
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(passes, after, 'no pass after close');
  });
});
