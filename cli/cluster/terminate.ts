/**
 * `terminate`: the provider deletes everything it recorded for this workspace (processes, node folders, cloud
 * resources), then the workspace forgets the cluster: the state goes back to empty and the admin kubeconfig, which
 * names a cluster that no longer exists, is removed. The master secret stays (it still decrypts backups of state
 * disks); `mini down` removes it too. Works from any interrupted state: the provider is found from the config, else
 * the state, else the resource journal, and the provider's terminate tolerates what is already gone.
 * `byTag` also has a cloud provider delete what carries the cluster's constellation-uid tag but was never recorded
 * (a crash between the cloud accepting a resource and the journal write); the local provider has no tags.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { InfrastructureProvider, ResourceJournal } from '../../providers/contract.js';
import { loadConfig, providerOf, type Config } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import { nullLogger, type Logger } from '../../lib/logging/index.js';
import {
  ADMIN_CONF_FILE,
  CONFIG_FILE,
  MASTER_SECRET_FILE,
  pathExists,
  STORE_CREDENTIALS_FILE,
} from '../../lib/workspace/files.js';
import { FileResourceJournal } from '../../lib/workspace/resource-journal.js';
import { emptyState, readStateOrEmpty, statePath, writeState, type State } from '../../lib/workspace/state.js';
import { infrastructureOptions, loadInfrastructure } from './provider.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';

export interface TerminateOptions {
  workspaceDir: string;
  journal: ResourceJournal;
  log: Logger;
  progress?: (message: string) => void;
  /** Default: the provider of the workspace, loaded by name. */
  provider?: InfrastructureProvider;
  /** Also delete resources tagged with the cluster's uid that the journal does not know (cloud providers). */
  byTag?: boolean;
  /** Where the user's kubeconfig is found (KUBECONFIG, else <home>/.kube/config); default process.env and the home folder. */
  kubeconfigEnv?: NodeJS.ProcessEnv;
  home?: string;
}

export interface TerminateResult {
  /** The provider whose resources were deleted; undefined when the workspace had nothing to delete. */
  provider?: string;
  /** Workspace files removed (the admin kubeconfig). */
  removedFiles: string[];
  /** The workspace has a master secret, and it stays. */
  masterSecretKept: boolean;
}

const PROVIDER_SECTIONS = ['local', 'qemu', 'aws', 'azure', 'gcp'] as const;

export async function terminateCluster(options: TerminateOptions): Promise<TerminateResult> {
  const { workspaceDir, log } = options;
  const journal = clusterJournalView(options.journal);
  const { config, state, name: found } = await findProvider(workspaceDir, journal, log);
  const providerName = options.provider?.name ?? found;
  if (options.byTag) refuseByTagWithout(providerName);
  const removedFiles: string[] = [];
  if (providerName) {
    const provider =
      options.provider ?? (await loadInfrastructure(providerName, infrastructureOptions(config, state, providerName)));
    options.progress?.(
      `deleting what the ${providerName} provider made${options.byTag ? ', and what carries its tag' : ''}`,
    );
    log.info('terminating', { provider: providerName, uid: state.infrastructure.uid, byTag: options.byTag === true });
    await provider.terminate(
      { journal, log, progress: options.progress, workspaceDir },
      options.byTag ? { byTag: true } : undefined,
    );
  }
  if (state.infrastructure.uid) {
    // The user's kubeconfig must not keep a context of a cluster that is gone (merged by --merge-kubeconfig).
    const { kubeconfigClusterName, removeMergedKubeconfig } = await import('./kubeconfig-merge.js');
    const changed = await removeMergedKubeconfig({
      clusterName: kubeconfigClusterName(state.infrastructure),
      env: options.kubeconfigEnv,
      home: options.home,
    });
    if (changed) {
      log.info('removed the cluster from the user kubeconfig', { file: changed });
      options.progress?.(`removed the cluster's context from ${changed}`);
    }
  }
  if (await pathExists(statePath(workspaceDir))) await writeState(workspaceDir, emptyState());
  // The cluster's credentials name a cluster that no longer exists.
  for (const name of [ADMIN_CONF_FILE, STORE_CREDENTIALS_FILE]) {
    const file = path.join(workspaceDir, name);
    if (await pathExists(file)) {
      await fs.rm(file);
      removedFiles.push(file);
    }
  }
  log.info('terminated', { provider: providerName });
  return {
    provider: providerName,
    removedFiles,
    masterSecretKept: await pathExists(path.join(workspaceDir, MASTER_SECRET_FILE)),
  };
}

/** Whether the workspace has (or had, half-made) a cluster: a created identity in the state, a recorded resource, or a local cluster folder. */
export async function hasCluster(workspaceDir: string): Promise<boolean> {
  const state = await readStateOrEmpty(workspaceDir).catch(() => undefined);
  if (state === undefined || state.infrastructure.uid !== '') return true; // an unreadable state is terminate's to sort out
  if (await pathExists(path.join(workspaceDir, LOCAL_CLUSTER_DIR))) return true;
  return (await clusterJournalView(new FileResourceJournal(workspaceDir)).list()).length > 0;
}

/** Refuses `terminate` in a folder without a cluster (before the question): nothing would be deleted. Reads only. */
export async function checkSomethingToTerminate(workspaceDir: string): Promise<void> {
  if (await hasCluster(workspaceDir)) return;
  throw new UserError(`The workspace ${workspaceDir} has no cluster: there is nothing to terminate.`, {
    hint: NO_CLUSTER_HINT,
  });
}

export const NO_CLUSTER_HINT =
  "Run the command in the cluster's workspace (-C <dir>): the folder that holds its constellation-state.yaml.";

/** The local provider's cluster folder in the workspace (providers/local/layout.ts). */
const LOCAL_CLUSTER_DIR = 'constellation-local';

/**
 * Refuses `terminate --by-tag` for a workspace whose provider has no tags (local), before anything is asked or
 * deleted. Reads the workspace only.
 */
export async function checkTerminateByTag(workspaceDir: string): Promise<void> {
  const { name } = await findProvider(
    workspaceDir,
    clusterJournalView(new FileResourceJournal(workspaceDir)),
    nullLogger,
  );
  refuseByTagWithout(name);
}

function refuseByTagWithout(providerName: string | undefined): void {
  if (providerName !== 'local' && providerName !== 'qemu') return;
  throw new UserError(`--by-tag works only for a cloud provider: the ${providerName} provider tags nothing.`, {
    hint: 'Run `constellation terminate` without --by-tag: the local provider finds every process it started by its owner mark, also ones it never recorded.',
  });
}

/** The provider whose cluster the workspace has: from the config, else the state, else the resource journal. */
async function findProvider(
  workspaceDir: string,
  journal: ResourceJournal,
  log: Logger,
): Promise<{ config?: Config; state: State; name?: string }> {
  const config = await loadConfigIfPresent(workspaceDir, log);
  const state = await readStateOrEmpty(workspaceDir);
  return { config, state, name: config ? providerOf(config) : await providerFromRecords(state, journal) };
}

/** The config, or undefined when there is none or it does not load (terminate must still clean up). */
async function loadConfigIfPresent(workspaceDir: string, log: Logger): Promise<Config | undefined> {
  if (!(await pathExists(path.join(workspaceDir, CONFIG_FILE)))) return undefined;
  try {
    return await loadConfig(workspaceDir);
  } catch (err) {
    log.warn('config unreadable; finding the provider from the state and the journal', {
      error: (err as Error).message,
    });
    return undefined;
  }
}

async function providerFromRecords(state: State, journal: ResourceJournal): Promise<string | undefined> {
  const fromState = PROVIDER_SECTIONS.find((p) => (state.infrastructure as Record<string, unknown>)[p] !== undefined);
  if (fromState) return fromState;
  const kinds = (await journal.list()).map((r) => r.kind.split(':')[0]);
  return kinds.find((k) => k !== undefined && k !== '');
}
