/**
 * `mini up` / `mini down`: a whole cluster on this machine with the local provider (process nodes) or, with --vm,
 * the qemu provider (VM nodes that boot the node image; without an image named, mini up builds the one of this
 * installation into the user's qemu image store first: providers/qemu/image-build.ts), in one command.
 * mini up = config generate local (with the node counts asked for) → create → init → wait until every node has
 * joined. Each step first looks at what the workspace already holds, so running mini up again after it was killed
 * at any point continues where it stopped: an existing config and state are used, create continues with the uid and
 * init secret it persisted, init reuses the master secret and salt it wrote before sending, and nodes of an
 * initialized cluster that do not run are started. mini down = terminate, then removal of every workspace file mini
 * up made, the master secret included.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  hasPowerControl,
  type InfrastructureProvider,
  type ProviderContext,
  type ResourceJournal,
} from '../../providers/contract.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { generateConfigFiles, loadConfig, providerOf, type Config } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import { systemClock, type Clock, type Sleep } from '../../lib/clock.js';
import { pollUntil } from '../../lib/poll.js';
import { settleAll } from '../../lib/settle.js';
import type { RandomSource } from '../../lib/kms/index.js';
import type { Logger } from '../../lib/logging/index.js';
import {
  ADMIN_CONF_FILE,
  CLUSTER_LOG_FILE,
  CONFIG_FILE,
  MASTER_SECRET_FILE,
  pathExists,
  RESOURCES_FILE,
  STATE_FILE,
  STORE_CREDENTIALS_FILE,
} from '../../lib/workspace/files.js';
import { readStateOrEmpty } from '../../lib/workspace/state.js';
import { editConfig } from '../../lib/config/edit.js';
import { createCluster } from './create.js';
import { initCluster, type InitOptions } from './init.js';
import { preloadInitExchange } from './init-exchange.js';
import { loadInfrastructure, workspaceInfrastructure } from './provider.js';
import { clusterStatus, NodeStatusConnections, summarizeStatus, type NodeStatusEntry } from './status.js';
import { hasCluster, NO_CLUSTER_HINT, terminateCluster } from './terminate.js';

export const MINI_STEPS = ['config', 'create', 'init', 'join'] as const;
export type MiniStep = (typeof MINI_STEPS)[number];

const CONTROL_PLANE_GROUP = 'control_plane_default';
const WORKER_GROUP = 'worker_default';
export const DEFAULT_CONTROL_PLANES = 1;
export const DEFAULT_WORKERS = 1;
/** How long mini up waits for VM nodes to boot (to serve init, to join): TCG on a loaded 2-core machine takes minutes. */
export const VM_BOOT_TIMEOUT_MS = 20 * 60_000;
/**
 * The least time a round of questions to the nodes that have not joined yet takes when it brought no news. A node
 * answers when its state changes (a long poll, NodeStatusConnections in ./status.ts), so a round that saw a change
 * is followed by the next at once; one without (a node that does not answer yet, or does not hold the call) is
 * spaced out to this, so the CLI does not ask in a tight loop.
 */
const JOIN_POLL_MS = 100;

export interface MiniUpOptions {
  workspaceDir: string;
  journal: ResourceJournal;
  log: Logger;
  /** Undefined: the default (1), or the earlier run's count when continuing one. */
  controlPlanes?: number;
  workers?: number;
  /** The image the nodes boot: `local` (the current build) or a version of `mini image create`. Undefined: `local`, or the earlier run's. */
  image?: string;
  /** VM nodes (the qemu provider); `image` is then a qemu image's folder or a version of the user's qemu image store. */
  vm?: boolean;
  /** The user's config folder (the qemu image store and the image key); default $XDG_CONFIG_HOME/constellation. */
  userConfigDir?: string;
  /** A step begins (message undefined) or reports a detail. */
  progress?: (step: MiniStep, message?: string) => void;
  random?: RandomSource;
  /** Default: the local provider's infrastructure. */
  provider?: InfrastructureProvider;
  /** Passed to init (tests). */
  init?: Pick<InitOptions, 'createValidator' | 'validatorDeps' | 'port' | 'connectTimeoutMs'>;
  /** How long to wait for every node to join. */
  joinTimeoutMs?: number;
  pollIntervalMs?: number;
  statusPort?: number;
  sleep?: Sleep;
  clock?: Clock;
}

export interface MiniUpResult {
  clusterId: string;
  kubernetesBackend: string;
  kubeconfigFile: string;
  /** The run continued a workspace an earlier mini up left. */
  continued: boolean;
  nodes: NodeStatusEntry[];
}

/**
 * What mini up checks before it writes or starts anything, the workspace folder itself included: the local
 * provider's preconditions (root, its programs, /dev/fuse, the built node program), then the workspace (writable,
 * and as root owned by root with every file in it). A run that fails here leaves no trace.
 */
export async function checkMiniUpPreconditions(workspaceDir: string, options: { vm?: boolean } = {}): Promise<void> {
  const [{ requireLocalPreconditions }, { checkWorkspaceAccess }] = await Promise.all([
    import('../../providers/local/preconditions.js'),
    import('../../lib/workspace/access.js'),
  ]);
  if (options.vm) await (await loadInfrastructure('qemu')).checkPreconditions?.();
  else await requireLocalPreconditions();
  await checkWorkspaceAccess(workspaceDir, { mayCreate: true });
}

export async function miniUp(options: MiniUpOptions): Promise<MiniUpResult> {
  const { workspaceDir, log } = options;
  const step = (s: MiniStep, message?: string) => options.progress?.(s, message);
  checkCount('control-plane', options.controlPlanes, 1, 90);
  checkCount('worker', options.workers, 0, 150);

  step('config');
  const { continued } = await prepareConfig(options);
  if (continued) step('config', 'continuing the cluster of an earlier run in this workspace');

  const provider = options.provider ?? (await workspaceInfrastructure(workspaceDir));
  const state = await readStateOrEmpty(workspaceDir);
  // The cluster is initialized while the workers still start: init needs only the control planes (a 1+9 cluster's
  // workers take most of the machine's CPU for more than a second while they boot).
  let workersStarting: Promise<void> | undefined;
  const ctx: ProviderContext = { journal: clusterJournalView(options.journal), log, workspaceDir };
  if (!state.clusterValues.clusterID) {
    step('create');
    ({ workersStarting } = await createCluster({
      workspaceDir,
      provider,
      journal: options.journal,
      log,
      random: options.random,
      progress: (m) => step('create', m),
      returnWhenControlPlanesUp: true,
      // Init follows at once: its client loads while the CLI has nothing else to do.
      whileControlPlanesBoot: preloadInitExchange,
    }));
  } else if (hasPowerControl(provider)) {
    // An earlier run may have stopped after init with workers that never started (they start while init runs).
    await provider.startNodes(await provider.nodeNames(ctx), ctx);
  }
  const workersUp = workersStarting?.catch((err: unknown) => {
    throw new UserError(`A worker did not start: ${err instanceof Error ? err.message : String(err)}`, {
      hint: `${err instanceof UserError && err.hint ? `${err.hint}. ` : ''}Run \`constellation mini up\` again to start it and wait for it to join.`,
    });
  });
  workersUp?.catch(() => undefined); // awaited below

  // A VM boots its firmware, kernel and node program under emulation where KVM does not run it (minutes here).
  const vm = provider.name === 'qemu';
  step('init');
  const [init] = await settleAll([
    initCluster({
      workspaceDir,
      log,
      random: options.random,
      progress: (m) => step('init', m),
      ...(vm ? { connectTimeoutMs: VM_BOOT_TIMEOUT_MS } : {}),
      // The cluster file is written by the workers' start too: recorded as initialized only once they are up.
      ...(workersUp
        ? {
            markInitialized: async () => {
              await workersUp.catch(() => undefined);
              await provider.markInitialized?.(ctx);
            },
          }
        : {}),
      ...options.init,
    }),
    workersUp,
  ]);

  step('join');
  const nodes = await waitUntilJoined(provider, init.clusterId, {
    ...(vm ? { joinTimeoutMs: VM_BOOT_TIMEOUT_MS } : {}),
    ...options,
  });
  return {
    clusterId: init.clusterId,
    kubernetesBackend: init.kubernetesBackend,
    kubeconfigFile: init.kubeconfigFile,
    continued,
    nodes,
  };
}

/** The local provider's address ranges hold 90 control-plane and 155 worker nodes. */
function checkCount(role: string, count: number | undefined, min: number, max: number): void {
  if (count !== undefined && (!Number.isInteger(count) || count < min || count > max)) {
    throw new UserError(`The number of ${role} nodes must be a whole number from ${min} to ${max}, not ${count}.`);
  }
}

/**
 * A fresh workspace gets a local config with the node counts asked for. A workspace of an earlier run keeps its
 * config; counts that differ from it are applied only while nothing was created yet.
 */
async function prepareConfig(options: MiniUpOptions): Promise<{ continued: boolean }> {
  const { workspaceDir, log } = options;
  const [hasConfig, hasState] = await Promise.all([
    pathExists(path.join(workspaceDir, CONFIG_FILE)),
    pathExists(path.join(workspaceDir, STATE_FILE)),
  ]);
  const wanted = (config?: Config) => ({
    [CONTROL_PLANE_GROUP]:
      options.controlPlanes ?? config?.nodeGroups[CONTROL_PLANE_GROUP]?.initialCount ?? DEFAULT_CONTROL_PLANES,
    [WORKER_GROUP]: options.workers ?? config?.nodeGroups[WORKER_GROUP]?.initialCount ?? DEFAULT_WORKERS,
  });
  if (!hasConfig) {
    if (hasState) {
      throw new UserError(`The workspace ${workspaceDir} has a state file (${STATE_FILE}) but no config.`, {
        hint: `Restore ${CONFIG_FILE}, or run \`constellation terminate\` and remove ${STATE_FILE}; or use a new directory (-C <dir>).`,
      });
    }
    const kind = options.vm ? 'qemu' : 'local';
    let image = options.image;
    if (options.vm && image === undefined) {
      const { ensureStoreImage } = await import('../../providers/qemu/image-build.js');
      const stored = await ensureStoreImage({
        userConfigDir: options.userConfigDir,
        progress: (m) => options.progress?.('config', m),
      });
      image = stored.version;
      log.info(stored.built ? 'built the qemu image into the image store' : 'the qemu image store has the image', {
        image,
      });
    }
    // Written with the counts and image asked for, and checked before it is written (one parse, not an edit's three).
    await generateConfigFiles(workspaceDir, kind, {
      initialCounts: wanted(),
      ...(image ? { image } : {}),
      validate: { allowIncomplete: options.vm ?? false },
    });
    log.info(`generated a ${kind} config`, { ...wanted(), image: image ?? 'local' });
    return { continued: false };
  }

  // Leniently first: a cloud config that is still incomplete must get this message, not a list of empty fields.
  const provider = providerOf(await loadConfig(workspaceDir, { allowIncomplete: true }));
  if (provider !== 'local' && provider !== 'qemu') {
    throw new UserError(
      `The workspace ${workspaceDir} holds a config for the ${provider} provider; mini up runs local clusters only.`,
      {
        hint: 'Run mini up in a new, empty directory (-C <dir>).',
      },
    );
  }
  if ((provider === 'qemu') !== (options.vm ?? false)) {
    throw new UserError(
      `The workspace ${workspaceDir} holds a cluster of ${provider === 'qemu' ? 'VM' : 'process'} nodes; mini up was asked for ${options.vm ? 'VM' : 'process'} nodes.`,
      {
        hint:
          provider === 'qemu'
            ? 'Run `mini up --vm` to continue it.'
            : 'Run mini up without --vm to continue it, or use a new directory (-C <dir>).',
      },
    );
  }
  const config = await loadConfig(workspaceDir);
  const counts = wanted(config);
  const differs = Object.entries(counts).some(([group, n]) => config.nodeGroups[group]?.initialCount !== n);
  const otherImage = options.image !== undefined && options.image !== config.image;
  if (differs || otherImage) {
    const state = await readStateOrEmpty(workspaceDir);
    if (state.infrastructure.uid) {
      const have = `${config.nodeGroups[CONTROL_PLANE_GROUP]?.initialCount ?? 0} control-plane and ${config.nodeGroups[WORKER_GROUP]?.initialCount ?? 0} worker nodes on image ${config.image}`;
      throw new UserError(
        `The cluster in ${workspaceDir} was started with ${have}; the flags ask for another ${differs ? 'size' : 'image'}.`,
        {
          hint: 'Run mini up without -c/-w/--image to continue it, or `constellation mini down` first to start over.',
        },
      );
    }
    await editConfig(workspaceDir, { initialCounts: counts, ...(otherImage ? { image: options.image } : {}) });
  }
  log.info('continuing with the existing config', counts);
  return { continued: true };
}

export type JoinWaitOptions = Pick<
  MiniUpOptions,
  'workspaceDir' | 'journal' | 'log' | 'joinTimeoutMs' | 'pollIntervalMs' | 'statusPort' | 'sleep' | 'clock'
> & {
  progress?: (step: 'join', message?: string) => void;
};

/**
 * Polls the nodes' status until every node has joined, or no node is still on its way (then the refused ones are
 * named). It asks only the nodes, over one connection per node for the whole wait, and a node that answered "joined"
 * is not asked again: a new connection per question is a TLS handshake on both ends (every 250 ms for each node of
 * a 1+9 cluster, a tenth of this machine's two cores), and the cluster store's client (which only
 * `constellation status` needs) is the largest module the CLI would load.
 */
export async function waitUntilJoined(
  provider: InfrastructureProvider,
  clusterId: string,
  options: JoinWaitOptions,
): Promise<NodeStatusEntry[]> {
  let last = '';
  let notJoined = (): UserError => new UserError('Not every node joined the cluster.');
  const joined = new Map<string, NodeStatusEntry>();
  const connections = new NodeStatusConnections();
  const clock = options.clock ?? systemClock;
  // A round that brought news is followed by the next at once; one without waits out the rest of the interval.
  let started = 0;
  let news = false;
  try {
    return await pollUntil(
      async () => {
        started = clock().getTime();
        const status = await clusterStatus({
          workspaceDir: options.workspaceDir,
          provider,
          journal: options.journal,
          log: options.log,
          clusterId,
          port: options.statusPort,
          timeoutMs: 2000,
          store: false,
          settled: joined,
          connections,
        });
        for (const n of status.nodes) if (n.state === 'joined') joined.set(n.name, n);
        const summary = summarizeStatus(status);
        news = summary !== last;
        if (news) options.progress?.('join', summary);
        last = summary;
        const pending = status.nodes.filter((n) => ['waiting', 'joining', 'unreachable'].includes(n.state));
        const bad = status.nodes.filter((n) => n.state !== 'joined' && !pending.includes(n));
        if (status.nodes.length > 0 && pending.length === 0 && bad.length === 0) return status.nodes;
        notJoined = () => {
          const listed = [...bad, ...pending]
            .map((n) => `  ${n.name}: ${n.state}${n.reason ? ` (${n.reason})` : ''}`)
            .join('\n');
          return new UserError(`Not every node joined the cluster (${summary}):\n${listed}`, {
            hint: bad.some((n) => n.state === 'refused')
              ? "A refused node does not run what the config's measurements expect. `constellation status` shows the current state; `constellation mini down` removes the cluster."
              : 'Nodes may still be starting: `constellation status` shows their state, and running mini up again waits again. `constellation mini down` removes the cluster.',
          });
        };
        if (pending.length === 0) throw notJoined(); // no node is still on its way
        return undefined;
      },
      {
        timeoutMs: options.joinTimeoutMs ?? 120_000,
        intervalMs: () =>
          news ? 0 : Math.max(0, (options.pollIntervalMs ?? JOIN_POLL_MS) - (clock().getTime() - started)),
        clock: options.clock,
        sleep: options.sleep,
        onTimeout: () => {
          throw notJoined();
        },
      },
    );
  } finally {
    await connections.close();
  }
}

export interface MiniDownOptions {
  workspaceDir: string;
  journal: ResourceJournal;
  log: Logger;
  progress?: (message: string) => void;
  /** Default: the local provider. */
  provider?: InfrastructureProvider;
}

/** The workspace files mini up makes (the debug log stays: it records this run too). */
export const MINI_FILES = [
  CONFIG_FILE,
  STATE_FILE,
  MASTER_SECRET_FILE,
  ADMIN_CONF_FILE,
  STORE_CREDENTIALS_FILE,
  RESOURCES_FILE,
  CLUSTER_LOG_FILE,
] as const;

/** Refuses `mini down` where there is neither a cluster nor a file of mini up's (before the question), as terminate does. */
export async function checkSomethingToRemove(workspaceDir: string): Promise<void> {
  if (await hasCluster(workspaceDir)) return;
  for (const name of MINI_FILES) if (await pathExists(path.join(workspaceDir, name))) return;
  throw new UserError(`The workspace ${workspaceDir} has no cluster: there is nothing to remove.`, {
    hint: NO_CLUSTER_HINT,
  });
}

export async function miniDown(options: MiniDownOptions): Promise<{ removedFiles: string[] }> {
  const { workspaceDir } = options;
  if (await pathExists(path.join(workspaceDir, CONFIG_FILE))) {
    let provider: string | undefined;
    try {
      provider = providerOf(await loadConfig(workspaceDir, { allowIncomplete: true }));
    } catch {
      // An unreadable config does not stop the clean-up; terminate finds the provider elsewhere.
    }
    if (provider !== undefined && provider !== 'local' && provider !== 'qemu') {
      throw new UserError(
        `The workspace ${workspaceDir} holds a ${provider} cluster; mini down removes local clusters only.`,
        {
          hint: 'Use `constellation terminate` for a cloud cluster.',
        },
      );
    }
  }
  const result = await terminateCluster(options);
  const removedFiles = [...result.removedFiles];
  for (const name of MINI_FILES) {
    const file = path.join(workspaceDir, name);
    if (await pathExists(file)) {
      await fs.rm(file);
      removedFiles.push(file);
    }
  }
  options.log.info('mini down removed the workspace files', { files: removedFiles.map((f) => path.basename(f)) });
  return { removedFiles };
}

/** What `mini reboot`, `mini stop` and `mini start` need of the local provider (LocalInfrastructure has it). */
export type PowerAction = 'reboot' | 'stop' | 'start';

export interface MiniPowerOptions {
  workspaceDir: string;
  journal: ResourceJournal;
  log: Logger;
  action: PowerAction;
  /** The nodes by name. */
  nodes?: string[];
  /** Every control-plane node (reboot: all at once). */
  controlPlanes?: boolean;
  progress?: (message: string) => void;
  /** Default: the local provider's infrastructure. */
  provider?: InfrastructureProvider;
}

/** Reboots, stops or starts local nodes as a hypervisor would; returns the nodes acted on. */
export async function miniPower(options: MiniPowerOptions): Promise<{ nodes: string[] }> {
  const { workspaceDir, log } = options;
  await requireLocalCluster(workspaceDir);
  const provider = options.provider ?? (await workspaceInfrastructure(workspaceDir));
  if (!hasPowerControl(provider))
    throw new UserError(`The ${provider.name} provider has no power control over its nodes.`);
  const ctx: ProviderContext = {
    journal: clusterJournalView(options.journal),
    log,
    workspaceDir,
    progress: options.progress,
  };
  const nodes = [
    ...new Set([
      ...(options.nodes ?? []),
      ...(options.controlPlanes ? await provider.nodeNames(ctx, 'control-plane') : []),
    ]),
  ];
  if (nodes.length === 0)
    throw new UserError(`Name the nodes to ${options.action}.`, {
      hint: 'Give node names (see `constellation status`), or --control-planes.',
    });
  log.info(`mini ${options.action}`, { nodes });
  const act = { reboot: provider.rebootNodes, stop: provider.stopNodes, start: provider.startNodes }[options.action];
  await act.call(provider, nodes, ctx);
  return { nodes };
}

async function requireLocalCluster(workspaceDir: string): Promise<void> {
  if (!(await pathExists(path.join(workspaceDir, CONFIG_FILE)))) {
    throw new UserError(`The workspace ${workspaceDir} has no cluster config.`, {
      hint: 'Run the command in the workspace of a local cluster (-C <dir>); `constellation mini up` makes one.',
    });
  }
  const provider = providerOf(await loadConfig(workspaceDir, { allowIncomplete: true }));
  if (provider !== 'local' && provider !== 'qemu') {
    throw new UserError(
      `The workspace ${workspaceDir} holds a ${provider} cluster; mini commands act on local clusters only.`,
      { hint: "Use your cloud's console or CLI to reboot cloud VMs." },
    );
  }
}
