/**
 * The CLI's side of the in-place Kubernetes upgrade (cli/cluster/kubernetes-upgrade.ts): planning against the
 * store's version, the upgrade record it writes (and rewrites on a continued run), and the wait for the control
 * planes, on a memory store with a fake clock and sleep. The nodes' side: test/bootstrapper/kubernetes-upgrade.test.ts.
 */
import assert from 'node:assert/strict';
import {
  planKubernetesStep,
  requestKubernetesStep,
  waitForControlPlanes,
  type ControlPlaneVersion,
  type WaitOptions,
} from '../../cli/cluster/kubernetes-upgrade.js';
import { MemoryClusterStore } from '../../lib/cluster-store/memory.js';
import type { JoinConfig, KubernetesUpgrade } from '../../lib/cluster-store/types.js';
import { UserError } from '../../lib/errors.js';

const T0 = new Date('2030-01-02T03:04:05.000Z');
const STEP = { from: 'v1.32.10', to: 'v1.33.6' };
const storeAt = (kubernetesVersion: string) => ({
  readJoinConfig: async () => ({
    config: { cluster: { apiServerEndpoint: '10.0.0.1:6443', kubernetesVersion } } as JoinConfig,
    revision: '1',
  }),
});

describe('cli/cluster/kubernetes-upgrade', () => {
  let store: MemoryClusterStore;
  beforeEach(() => (store = new MemoryClusterStore()));
  const record = async () => (await store.readKubernetesUpgrade())?.upgrade;

  describe('planKubernetesStep', () => {
    it("is nothing when the store's version is the config's", async () => {
      assert.equal(await planKubernetesStep(storeAt('v1.32.10'), 'v1.32.10'), undefined);
    });

    it("goes one minor version up from the store's version", async () => {
      assert.deepEqual(await planKubernetesStep(storeAt('v1.32.10'), 'v1.33.6'), STEP);
    });

    it('refuses two minor versions at once and a downgrade, naming both versions', async () => {
      await assert.rejects(
        planKubernetesStep(storeAt('v1.31.14'), 'v1.33.6'),
        (err: unknown) => err instanceof UserError && /from v1\.31\.14 to v1\.33\.6 in one upgrade/.test(err.message),
      );
      await assert.rejects(
        planKubernetesStep(storeAt('v1.33.6'), 'v1.32.10'),
        (err: unknown) => err instanceof UserError && /from v1\.33\.6 down to v1\.32\.10/.test(err.message),
      );
    });
  });

  describe('requestKubernetesStep', () => {
    it('writes a new record for the control planes to follow', async () => {
      await requestKubernetesStep(store, STEP, () => T0);
      assert.deepEqual(await record(), {
        version: 'v1.33.6',
        from: 'v1.32.10',
        requestedAt: T0.toISOString(),
        nodes: {},
      });
    });

    it('replaces a finished record of another version', async () => {
      await store.swapKubernetesUpgrade(
        {
          version: 'v1.32.10',
          from: 'v1.31.14',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          applied: true,
          nodes: {},
        },
        undefined,
      );
      await requestKubernetesStep(store, STEP, () => T0);
      assert.deepEqual(await record(), {
        version: 'v1.33.6',
        from: 'v1.32.10',
        requestedAt: T0.toISOString(),
        nodes: {},
      });
    });

    const at = T0.toISOString();
    const continued: Array<[string, KubernetesUpgrade, KubernetesUpgrade]> = [
      [
        'keeps the progress of a continued run as it is',
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          applied: true,
          nodes: { 'control-plane-0': { result: 'upgraded', at } },
        },
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          applied: true,
          nodes: { 'control-plane-0': { result: 'upgraded', at } },
        },
      ],
      [
        "clears a follower's failure, so it tries again",
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          applied: true,
          nodes: {
            'control-plane-0': { result: 'upgraded', at },
            'control-plane-1': { result: 'failed', reason: 'boom', at },
          },
        },
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          applied: true,
          nodes: { 'control-plane-0': { result: 'upgraded', at } },
        },
      ],
      [
        'drops the claim of a first that failed before it applied, so any control plane may claim again',
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'earlier',
          first: 'control-plane-0',
          nodes: { 'control-plane-0': { result: 'failed', reason: 'boom', at } },
        },
        { version: 'v1.33.6', from: 'v1.32.10', requestedAt: 'earlier', nodes: {} },
      ],
    ];
    for (const [name, before, after] of continued) {
      it(name, async () => {
        await store.swapKubernetesUpgrade(before, undefined);
        await requestKubernetesStep(store, STEP, () => T0);
        assert.deepEqual(await record(), after);
      });
    }
  });

  describe('waitForControlPlanes', () => {
    /** A wait whose control planes report `versions[pass]` on each pass; the fake clock moves a second per sleep. */
    function waiting(passes: ControlPlaneVersion[][], over: Partial<WaitOptions> = {}) {
      let now = T0.getTime();
      let pass = 0;
      const lines: string[] = [];
      const options: WaitOptions = {
        store,
        step: STEP,
        controlPlanes: async () => passes[Math.min(pass, passes.length - 1)]!,
        nodeLog: (name) => `/ws/constellation-local/nodes/${name}/node.log`,
        progress: (line) => lines.push(line),
        timeoutMs: 5000,
        clock: () => new Date(now),
        sleep: async (ms) => {
          now += ms;
          pass++;
        },
        pollIntervalMs: 1000,
        ...over,
      };
      return { run: () => waitForControlPlanes(options), lines, passes: () => pass };
    }

    it('returns once every control plane reports the new version, saying which did when', async () => {
      await store.swapKubernetesUpgrade(
        { version: 'v1.33.6', from: 'v1.32.10', requestedAt: 'x', first: 'control-plane-1', nodes: {} },
        undefined,
      );
      const w = waiting([
        [
          { name: 'control-plane-0', kubernetesVersion: 'v1.32.10' },
          { name: 'control-plane-1', kubernetesVersion: 'v1.32.10' },
        ],
        [
          { name: 'control-plane-0', kubernetesVersion: 'v1.32.10' },
          { name: 'control-plane-1', kubernetesVersion: 'v1.33.6' },
        ],
        [
          { name: 'control-plane-0', kubernetesVersion: 'v1.33.6' },
          { name: 'control-plane-1', kubernetesVersion: 'v1.33.6' },
        ],
      ]);
      await w.run();
      assert.equal(w.passes(), 2);
      assert.deepEqual(w.lines, [
        'control-plane-1 runs Kubernetes v1.33.6 (it ran the cluster-wide upgrade)',
        'control-plane-0 runs Kubernetes v1.33.6',
      ]);
    });

    it('stops at a failure a control plane recorded, naming the node, its reason and where its log is', async () => {
      await store.swapKubernetesUpgrade(
        {
          version: 'v1.33.6',
          from: 'v1.32.10',
          requestedAt: 'x',
          first: 'control-plane-0',
          nodes: {
            'control-plane-0': {
              result: 'failed',
              reason: 'kubeadm upgrade apply failed with exit code 1: FATAL',
              at: 'x',
            },
          },
        },
        undefined,
      );
      const w = waiting([
        [
          { name: 'control-plane-0', kubernetesVersion: 'v1.32.10' },
          { name: 'control-plane-1', kubernetesVersion: 'v1.32.10' },
        ],
      ]);
      await assert.rejects(w.run(), (err: unknown) => {
        assert.ok(err instanceof UserError);
        assert.equal(
          err.message,
          'control-plane-0 could not upgrade Kubernetes from v1.32.10 to v1.33.6: kubeadm upgrade apply failed with exit code 1: FATAL',
        );
        assert.match(
          err.hint ?? '',
          /^Its log has the whole output: \/ws\/constellation-local\/nodes\/control-plane-0\/node\.log\. No node was replaced/,
        );
        return true;
      });
    });

    it('gives up after the timeout, naming each control plane that did not follow and why it may wait', async () => {
      await store.swapKubernetesUpgrade(
        { version: 'v1.33.6', from: 'v1.32.10', requestedAt: 'x', first: 'control-plane-0', nodes: {} },
        undefined,
      );
      const w = waiting([[{ name: 'control-plane-0', kubernetesVersion: 'v1.32.10' }, { name: 'control-plane-1' }]]);
      await assert.rejects(w.run(), (err: unknown) => {
        assert.ok(err instanceof UserError);
        assert.equal(
          err.message,
          'Not every control plane upgraded Kubernetes to v1.33.6 within 5 s: control-plane-0 (runs v1.32.10), control-plane-1 (not answering; waiting for control-plane-0, which runs the cluster-wide upgrade).',
        );
        assert.match(
          err.hint ?? '',
          /nodes\/control-plane-0\/node\.log, \/ws\/constellation-local\/nodes\/control-plane-1\/node\.log/,
        );
        return true;
      });
      // Asked at 0, 1, …, 5 s: five pauses, the last ask at the deadline (lib/poll.ts).
      assert.equal(w.passes(), 5, 'polled every second for 5 s on the injected clock');
    });
  });
});
