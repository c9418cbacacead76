/**
 * `upgrade apply`'s Kubernetes step (docs/design.md#upgrades): a new Kubernetes version goes to the control planes in place,
 * before any node is replaced, because a node that joins at a newer version than the cluster's control plane is
 * set up with the old one (kubeadm renders the cluster's ClusterConfiguration):
 *
 *   plan:    the store's version → the config's, checked by kubeadm's rules (no downgrade, one minor at a time)
 *            before anything changes
 *   request: the upgrade record in the cluster store (writing the store is the authentication: only the admin
 *            credentials of the workspace can); every control plane's agent (bootstrapper/kubernetes-upgrade.ts)
 *            follows it: one claims `kubeadm upgrade apply`, the others then run `kubeadm upgrade node`
 *   wait:    until every control plane reports the new version (GetStatus), or one records a failure (named, with
 *            where its log is), or the time is up (naming the nodes that did not follow)
 *
 * The version new nodes join with (the join configuration's) changes only after this, with the new measurements;
 * workers take the new version by replacement.
 */
import type { ClusterStore, KubernetesUpgrade } from '../../lib/cluster-store/types.js';
import { systemClock, type Clock, type Sleep } from '../../lib/clock.js';
import { pollUntil } from '../../lib/poll.js';
import { checkKubernetesUpgrade } from '../../lib/config/versions.js';
import { UserError } from '../../lib/errors.js';
import type { InfrastructureProvider, ProviderContext } from '../../providers/contract.js';
import { getNodeStatus, VERIFY_PORT, type NodeStatusEntry } from './status.js';
import { withWorkspaceStore } from './store.js';

export interface KubernetesStep {
  from: string;
  to: string;
}

type UpgradeRecordStore = Pick<ClusterStore, 'readKubernetesUpgrade' | 'swapKubernetesUpgrade'>;

export interface InPlaceOptions {
  step: KubernetesStep;
  workspaceDir: string;
  provider: InfrastructureProvider;
  ctx: ProviderContext;
  progress: (line: string) => void;
  /** Longest wait for every control plane; default 10 minutes. */
  timeoutMs?: number;
  pollIntervalMs?: number;
}

/** Asks the control planes to upgrade Kubernetes in place and waits until each reports the new version. */
export async function upgradeControlPlanesInPlace(options: InPlaceOptions): Promise<void> {
  const { step, provider, ctx, workspaceDir, progress } = options;
  const logOf = await nodeLogLocator(provider, workspaceDir);
  await withWorkspaceStore(workspaceDir, await provider.listInstances(ctx), async (store) => {
    await requestKubernetesStep(store, step, systemClock);
    progress(`asked the control planes to upgrade Kubernetes from ${step.from} to ${step.to} in place`);
    await waitForControlPlanes({
      store,
      step,
      controlPlanes: async () => {
        const running = (await provider.listInstances(ctx)).filter(
          (i) => i.role === 'control-plane' && i.state === 'running',
        );
        return Promise.all(
          running.map(async (i) => {
            const status = await getNodeStatus(`${i.publicIp || i.privateIp}:${VERIFY_PORT}`, 2000).catch(
              () => undefined,
            );
            return { name: i.name, kubernetesVersion: status?.kubernetesVersion };
          }),
        );
      },
      nodeLog: logOf,
      progress,
      timeoutMs: options.timeoutMs ?? 600_000,
      pollIntervalMs: options.pollIntervalMs,
      clock: systemClock,
    });
  });
}

/** Whether a node runs what the config asks for but its Kubernetes version (the status names each difference). */
export function onlyKubernetesDiffers(node: NodeStatusEntry): boolean {
  const differences = node.outdated ?? [];
  return differences.length > 0 && differences.every((difference) => difference.startsWith('kubernetesVersion '));
}

/** Where a node's log is: a file in the workspace for local nodes, the bootstrapper's log on the machine otherwise. */
async function nodeLogLocator(
  provider: InfrastructureProvider,
  workspaceDir: string,
): Promise<(name: string) => string> {
  if (provider.name !== 'local') return (name) => `the bootstrapper's log on ${name}`;
  const { nodePaths } = await import('../../providers/local/layout.js');
  return (name) => nodePaths(workspaceDir, name).log;
}

/** The in-place step from the store's version to `target`; undefined when the cluster runs it. Refuses what kubeadm refuses. */
export async function planKubernetesStep(
  store: Pick<ClusterStore, 'readJoinConfig'>,
  target: string,
): Promise<KubernetesStep | undefined> {
  const from = (await store.readJoinConfig()).config.cluster.kubernetesVersion;
  return checkKubernetesUpgrade(from, target) === 'same' ? undefined : { from, to: target };
}

/**
 * Writes the upgrade record for `step`. A record for the same version is kept (a continued run), with its failures
 * cleared so the control planes try again, and its claim dropped when the first failed before it applied.
 */
export async function requestKubernetesStep(
  store: UpgradeRecordStore,
  step: KubernetesStep,
  clock: Clock,
): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const read = await store.readKubernetesUpgrade();
    let next: KubernetesUpgrade;
    if (read && read.upgrade.version === step.to) {
      const failed = (name: string) => read.upgrade.nodes[name]?.result === 'failed';
      const nodes = Object.fromEntries(Object.entries(read.upgrade.nodes).filter(([name]) => !failed(name)));
      const { first, ...rest } = read.upgrade;
      const keepClaim = first !== undefined && (read.upgrade.applied || !failed(first));
      next = { ...rest, ...(keepClaim ? { first } : {}), nodes };
    } else {
      next = { version: step.to, from: step.from, requestedAt: clock().toISOString(), nodes: {} };
    }
    if (read && JSON.stringify(next) === JSON.stringify(read.upgrade)) return;
    if (await store.swapKubernetesUpgrade(next, read?.revision)) return;
  }
  throw new UserError('The Kubernetes upgrade record in the cluster store kept changing while this run wrote it.', {
    hint: 'Run the command again.',
  });
}

export interface ControlPlaneVersion {
  name: string;
  /** What the node reports (GetStatus); undefined when it does not answer. */
  kubernetesVersion?: string;
}

export interface WaitOptions {
  store: UpgradeRecordStore;
  step: KubernetesStep;
  /** Every control plane the provider lists as running, with the version it reports now. */
  controlPlanes: () => Promise<ControlPlaneVersion[]>;
  /** Where a node's log is, for messages. */
  nodeLog: (name: string) => string;
  progress: (line: string) => void;
  timeoutMs: number;
  pollIntervalMs?: number;
  clock: Clock;
  sleep?: Sleep;
}

/** Resolves when every control plane reports the new version; a recorded failure or the timeout is a UserError. */
export async function waitForControlPlanes(options: WaitOptions): Promise<void> {
  const { step, clock } = options;
  const reported = new Set<string>();
  let behind: ControlPlaneVersion[] = [];
  let upgrade: KubernetesUpgrade | undefined;
  await pollUntil(
    async () => {
      // The record is read after the nodes, so it is at least as new as what they report.
      const nodes = await options.controlPlanes();
      const record = await options.store.readKubernetesUpgrade();
      upgrade = record?.upgrade.version === step.to ? record.upgrade : undefined;
      const failed = Object.entries(upgrade?.nodes ?? {}).find(
        ([name, n]) => n.result === 'failed' && nodes.some((cp) => cp.name === name),
      );
      if (failed) {
        const [name, { reason }] = failed;
        throw new UserError(
          `${name} could not upgrade Kubernetes from ${step.from} to ${step.to}: ${reason ?? 'no reason recorded'}`,
          {
            hint: `Its log has the whole output: ${options.nodeLog(name)}. No node was replaced; fix the cause and run \`constellation upgrade apply\` again, which asks the control planes again.`,
          },
        );
      }
      behind = nodes.filter(
        (cp) =>
          cp.kubernetesVersion === undefined || cp.kubernetesVersion.replace(/^v/, '') !== step.to.replace(/^v/, ''),
      );
      for (const cp of nodes) {
        if (!behind.includes(cp) && !reported.has(cp.name)) {
          reported.add(cp.name);
          options.progress(
            `${cp.name} runs Kubernetes ${step.to}${upgrade?.first === cp.name ? ' (it ran the cluster-wide upgrade)' : ''}`,
          );
        }
      }
      return nodes.length > 0 && behind.length === 0 ? true : undefined;
    },
    {
      timeoutMs: options.timeoutMs,
      intervalMs: options.pollIntervalMs ?? 500,
      clock,
      sleep: options.sleep,
      onTimeout: () => {
        const who = behind.map(
          (cp) =>
            `${cp.name} (${cp.kubernetesVersion === undefined ? 'not answering' : `runs ${cp.kubernetesVersion || 'no version'}`}${waitingOn(upgrade, cp.name)})`,
        );
        throw new UserError(
          `Not every control plane upgraded Kubernetes to ${step.to} within ${Math.round(options.timeoutMs / 1000)} s: ${who.join(', ')}.`,
          {
            hint: `See the log of ${behind.map((cp) => options.nodeLog(cp.name)).join(', ')}. No node was replaced; run \`constellation upgrade apply\` again to keep waiting.`,
          },
        );
      },
    },
  );
}

/** Why a control plane may not have followed yet, from the record. */
function waitingOn(upgrade: KubernetesUpgrade | undefined, name: string): string {
  if (!upgrade) return '; the upgrade record is gone';
  if (upgrade.first === undefined) return '; no control plane claimed the upgrade';
  if (upgrade.first !== name && !upgrade.applied)
    return `; waiting for ${upgrade.first}, which runs the cluster-wide upgrade`;
  return '';
}
