/**
 * `apply`: one command that brings the cluster to the config, in phases (as upstream's `constellation apply`):
 *
 *   infrastructure   no cluster yet: create it; else scale each node group to the config's count (new nodes join by
 *                    attestation; removal takes the newest nodes first, a control plane's etcd member leaves first)
 *   init             not initialized yet: init
 *   attestationconfig / image / k8s
 *                    nodes that do not run what the config asks for are replaced one at a time (`upgrade apply`);
 *                    with only attestationconfig, the config's measurements are written to the cluster store alone
 *
 * Each phase looks at what the workspace and the cluster already are, so apply can be run again at any time.
 */
import { loadConfig } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logging/index.js';
import { readStateOrEmpty } from '../../lib/workspace/state.js';
import type { InfrastructureProvider, ProviderContext, ResourceJournal } from '../../providers/contract.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { createCluster, nodeGroupSpecs } from './create.js';
import { initCluster, type InitOptions } from './init.js';
import { waitUntilJoined } from './mini.js';
import { removeStoreMember, setMeasurements, withWorkspaceStore } from './store.js';
import { newestFirst } from './newest-first.js';
import { verifiedConfigMeasurements } from './trusted-measurements.js';
import { upgradeCluster, type UpgradePlan, type UpgradeResult } from './upgrade.js';

export const APPLY_PHASES = ['infrastructure', 'init', 'attestationconfig', 'image', 'k8s'] as const;
export type ApplyPhase = (typeof APPLY_PHASES)[number];

export interface ApplyOptions {
  workspaceDir: string;
  log: Logger;
  journal: ResourceJournal;
  provider: InfrastructureProvider;
  skip?: ReadonlySet<ApplyPhase>;
  progress?: (line: string) => void;
  confirmUpgrade?: (plan: UpgradePlan) => Promise<boolean>;
  init?: Pick<InitOptions, 'createValidator' | 'validatorDeps' | 'port' | 'connectTimeoutMs'>;
  joinTimeoutMs?: number;
}

export interface ApplyResult {
  created: boolean;
  initialized: boolean;
  /** Node groups whose size changed: group → [from, to]. */
  scaled: Record<string, [number, number]>;
  upgrade?: UpgradeResult;
  measurementsWritten: boolean;
  /** The workspace's admin kubeconfig where the cluster runs Kubernetes ('' where it does not). */
  kubeconfigFile: string;
}

export async function applyConfig(options: ApplyOptions): Promise<ApplyResult> {
  const { workspaceDir, log, provider } = options;
  const skip = options.skip ?? new Set<ApplyPhase>();
  const say = (line: string) => {
    log.info(line);
    options.progress?.(line);
  };
  const ctx: ProviderContext = {
    journal: clusterJournalView(options.journal),
    log,
    workspaceDir,
    progress: options.progress,
  };
  const result: ApplyResult = {
    created: false,
    initialized: false,
    scaled: {},
    measurementsWritten: false,
    kubeconfigFile: '',
  };
  const config = await loadConfig(workspaceDir);
  let state = await readStateOrEmpty(workspaceDir);

  if (!skip.has('infrastructure')) {
    if (!state.infrastructure.clusterEndpoint) {
      say('creating the cluster');
      await createCluster({ workspaceDir, provider, journal: options.journal, log, progress: say });
      result.created = true;
    } else {
      // Nodes added to an initialized cluster must never serve Init: the metadata says so before any is added.
      if (state.clusterValues.clusterID) await provider.markInitialized?.(ctx);
      for (const group of nodeGroupSpecs(config)) {
        const members = (await provider.listInstances(ctx)).filter((i) => i.nodeGroup === group.name);
        if (members.length === group.initialCount) continue;
        if (group.role === 'control-plane' && group.initialCount < 1)
          throw new UserError('A cluster needs at least one control-plane node.', {
            hint: `Set nodeGroups.${group.name}.initialCount to 1 or more.`,
          });
        say(`scaling ${group.name} from ${members.length} to ${group.initialCount} nodes`);
        if (group.initialCount < members.length) {
          // Scale-in removes exactly the nodes chosen here (the newest by the creation time the provider reports),
          // never ones the cloud picks: a node leaves the load balancer, a control plane then the store (the quorum
          // never counts a node that is gone), then exactly that instance goes and its group shrinks by one.
          if (!provider.removeInstance) {
            throw new UserError(
              `The ${provider.name} provider cannot remove a chosen instance, so node groups cannot be scaled in safely.`,
              {
                hint: `Keep nodeGroups.${group.name}.initialCount at ${members.length}. Nothing was changed.`,
              },
            );
          }
          for (const node of newestFirst(members).slice(0, members.length - group.initialCount)) {
            await provider.drainInstance?.(node.id, ctx);
            if (group.role === 'control-plane' && state.clusterValues.clusterID)
              await removeStoreMember(workspaceDir, members, node.name);
            await provider.removeInstance(node.id, ctx);
            say(`removed ${node.name}`);
          }
        } else {
          await provider.scaleNodeGroup(group.name, group.initialCount, ctx);
        }
        result.scaled[group.name] = [members.length, group.initialCount];
      }
    }
  }
  state = await readStateOrEmpty(workspaceDir);

  if (!skip.has('init') && !state.clusterValues.clusterID) {
    if (!state.infrastructure.clusterEndpoint)
      throw new UserError('The cluster has no infrastructure yet, so it cannot be initialized.', {
        hint: 'Run apply without skipping the infrastructure phase.',
      });
    say('initializing the cluster');
    result.kubeconfigFile = (await initCluster({ workspaceDir, log, progress: say, ...options.init })).kubeconfigFile;
    result.initialized = true;
  }
  state = await readStateOrEmpty(workspaceDir);
  if (!state.clusterValues.clusterID) return result;

  say('waiting for every node to join');
  await waitUntilJoined(provider, state.clusterValues.clusterID, {
    workspaceDir,
    journal: options.journal,
    log,
    joinTimeoutMs: options.joinTimeoutMs,
  });

  const upgrade = !skip.has('image') || !skip.has('k8s');
  if (upgrade && !result.created) {
    result.upgrade = await upgradeCluster({
      workspaceDir,
      log,
      journal: options.journal,
      provider,
      progress: say,
      confirm: options.confirmUpgrade,
    });
  } else if (!skip.has('attestationconfig') && !result.created) {
    // Only what verifies against the image's signed measurements (or the local build as measured) reaches the store.
    const verified = await verifiedConfigMeasurements(config, { provider, workspaceDir });
    await withWorkspaceStore(workspaceDir, await provider.listInstances(ctx), (store) =>
      setMeasurements(store, verified),
    );
    result.measurementsWritten = true;
    say(`wrote the config's measurements to the cluster store (verified: ${verified.source})`);
  }
  return result;
}
