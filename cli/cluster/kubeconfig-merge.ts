/**
 * `--merge-kubeconfig` (init, mini up): merges the cluster's admin kubeconfig into the user's kubeconfig
 * (the first file of KUBECONFIG, else ~/.kube/config) with @kubernetes/client-node's KubeConfig, keeps every other
 * cluster, user and context, replaces entries of the same name (this cluster's fresh credentials), and makes the
 * cluster's context the current one. A kubeconfig that cannot be parsed is left untouched; the write is atomic, 0600.
 * Given the cluster's name, the entries are named after it (cluster `<name>`, user `<name>-admin`, context
 * `admin@<name>`, with name = config name + uid: kubeconfigClusterName), so a second cluster's merge never replaces
 * the first's, and `terminate`/`mini down` remove exactly these (removeMergedKubeconfig). A cluster that runs no
 * Kubernetes has no kubeconfig, so nothing is merged (docs/workflows/mini.md).
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { parse as parseYaml, stringify } from 'yaml';
import { yamlNestingProblem } from '../../lib/yaml-nesting.js';

export interface MergeKubeconfigOptions {
  /** The cluster's admin kubeconfig (constellation-admin.conf). */
  adminKubeconfig: string;
  /** Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Default: os.homedir(). */
  home?: string;
  /** Names the merged entries after the cluster (kubeconfigClusterName); default: the admin kubeconfig's own names. */
  clusterName?: string;
}

/** The name a cluster's merged kubeconfig entries carry: the config's name and the uid (unique per cluster). */
export function kubeconfigClusterName(infrastructure: { name: string; uid: string }): string {
  return `${infrastructure.name || 'constell'}-${infrastructure.uid}`;
}

/** The entries of a cluster in a merged kubeconfig. */
export function mergedNames(clusterName: string): { cluster: string; user: string; context: string } {
  return { cluster: clusterName, user: `${clusterName}-admin`, context: `admin@${clusterName}` };
}

export interface MergeKubeconfigResult {
  file: string;
  context: string;
}

/** Where kubectl reads its config: the first file of KUBECONFIG, else ~/.kube/config. */
export function userKubeconfigPath(env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string {
  const first = (env.KUBECONFIG ?? '').split(path.delimiter).find((p) => p !== '');
  return first ? path.resolve(first) : path.join(home, '.kube', 'config');
}

export async function mergeKubeconfig(options: MergeKubeconfigOptions): Promise<MergeKubeconfigResult> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const target = userKubeconfigPath(options.env, options.home);
  const admin = new KubeConfig();
  admin.loadFromString(
    (
      await readRegularFile(options.adminKubeconfig, { what: 'the kubeconfig', maxBytes: SIZE_LIMITS.kubeconfig })
    ).toString('utf8'),
  );
  if (!admin.getCurrentContext())
    throw new UserError(`${options.adminKubeconfig} names no current context.`, {
      hint: 'Run `constellation init` again to write it anew.',
    });
  if (options.clusterName) renameEntries(admin, mergedNames(options.clusterName));
  const context = admin.getCurrentContext();

  const user = new KubeConfig();
  let existing: string | undefined;
  try {
    existing = await fs.readFile(target, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new UserError(`Cannot read your kubeconfig ${target}: ${(err as Error).message}`, { cause: err });
  }
  if (existing !== undefined && existing.trim() !== '') {
    try {
      const tooDeep = yamlNestingProblem(existing);
      if (tooDeep) throw new Error(tooDeep);
      checkKubeconfigShape(parseYaml(existing));
      user.loadFromString(existing);
    } catch (err) {
      throw new UserError(`Your kubeconfig ${target} cannot be parsed (${firstLine(err)}); it was left untouched.`, {
        hint: `Fix it, or merge by hand: KUBECONFIG=${options.adminKubeconfig}:${target} kubectl config view --flatten. The cluster's own kubeconfig is ${options.adminKubeconfig}.`,
        cause: err,
      });
    }
  }
  const replaced = <T extends { name: string }>(mine: readonly T[], theirs: readonly T[]) => [
    ...mine.filter((m) => !theirs.some((t) => t.name === m.name)),
    ...theirs,
  ];
  const merged = new KubeConfig();
  merged.loadFromOptions({
    clusters: replaced(user.getClusters(), admin.getClusters()),
    users: replaced(user.getUsers(), admin.getUsers()),
    contexts: replaced(user.getContexts(), admin.getContexts()),
    currentContext: context,
  });
  await fs.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
  const out = JSON.parse(merged.exportConfig()) as { contexts?: { context?: Record<string, unknown> }[] };
  // client-node repeats each context's name inside it; kubeconfig files do not have that field.
  for (const c of out.contexts ?? []) delete c.context?.name;
  await writeFileAtomic(target, stringify(out), { mode: 0o600, what: 'your kubeconfig' });
  return { file: target, context };
}

/** Renames the admin kubeconfig's (one) cluster, user and context to `names`, keeping what the context refers to. */
function renameEntries(
  admin: import('@kubernetes/client-node').KubeConfig,
  names: { cluster: string; user: string; context: string },
): void {
  const current = admin.getContextObject(admin.getCurrentContext());
  const clusters = admin.getClusters().map((c) => (c.name === current?.cluster ? { ...c, name: names.cluster } : c));
  const users = admin.getUsers().map((u) => (u.name === current?.user ? { ...u, name: names.user } : u));
  const contexts = admin
    .getContexts()
    .map((c) =>
      c.name === current?.name ? { ...c, name: names.context, cluster: names.cluster, user: names.user } : c,
    );
  admin.loadFromOptions({ clusters, users, contexts, currentContext: names.context });
}

/**
 * Removes a cluster's merged entries (mergedNames) from the user's kubeconfig: at terminate and mini down, so no
 * context points to a cluster that is gone. A kubeconfig without them is not touched (nor one that cannot be
 * parsed); the current context is unset when it was this cluster's. Returns the file changed, if any.
 */
export async function removeMergedKubeconfig(options: {
  clusterName: string;
  env?: NodeJS.ProcessEnv;
  home?: string;
}): Promise<string | undefined> {
  const target = userKubeconfigPath(options.env, options.home);
  let text: string;
  try {
    text = await fs.readFile(target, 'utf8');
  } catch {
    return undefined;
  }
  const names = mergedNames(options.clusterName);
  let doc: Record<string, unknown>;
  try {
    if (yamlNestingProblem(text)) return undefined;
    doc = parseYaml(text) as Record<string, unknown>;
    checkKubeconfigShape(doc);
  } catch {
    return undefined;
  }
  const without = (key: string, name: string) => {
    const list = (doc[key] as { name: string }[] | undefined) ?? [];
    const kept = list.filter((e) => e.name !== name);
    const changed = kept.length !== list.length;
    if (changed) doc[key] = kept;
    return changed;
  };
  const removed = [
    without('contexts', names.context),
    without('clusters', names.cluster),
    without('users', names.user),
  ].some(Boolean);
  if (!removed) return undefined;
  if (doc['current-context'] === names.context) doc['current-context'] = '';
  await writeFileAtomic(target, stringify(doc), { mode: 0o600, what: 'your kubeconfig' });
  return target;
}

/**
 * client-node's loader is lenient (a file that is not a kubeconfig at all loads as an empty one, and would be
 * overwritten): a kubeconfig is a mapping whose clusters, users and contexts are lists of named entries.
 */
function checkKubeconfigShape(doc: unknown): void {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Error('it is not a YAML mapping');
  const record = doc as Record<string, unknown>;
  if (record.kind !== undefined && record.kind !== 'Config')
    throw new Error(`its kind is ${String(record.kind)}, not Config`);
  for (const key of ['clusters', 'users', 'contexts']) {
    const list = record[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list) || !list.every((e) => typeof (e as { name?: unknown })?.name === 'string'))
      throw new Error(`its ${key} is not a list of named entries`);
  }
}

/**
 * mergeKubeconfig with the entries named after the workspace's cluster, then one line saying what it did (for the
 * commands' --merge-kubeconfig). An empty `adminKubeconfig` (a cluster without Kubernetes) merges nothing.
 */
export async function mergeKubeconfigAndReport(
  workspaceDir: string,
  adminKubeconfig: string,
  log: (line: string) => void,
): Promise<MergeKubeconfigResult | undefined> {
  if (!adminKubeconfig) {
    log(
      'Nothing was merged into your kubeconfig: the cluster runs no Kubernetes (kubernetesBackend: none), so it has no API server to point to.',
    );
    return undefined;
  }
  const { readStateOrEmpty } = await import('../../lib/workspace/state.js');
  const state = await readStateOrEmpty(workspaceDir);
  const merged = await mergeKubeconfig({
    adminKubeconfig,
    clusterName: state.infrastructure.uid ? kubeconfigClusterName(state.infrastructure) : undefined,
  });
  log(`Merged the cluster's kubeconfig into ${merged.file}; current context: ${merged.context}.`);
  return merged;
}

function firstLine(err: unknown): string {
  return String((err as Error).message ?? err)
    .split('\n')[0]
    .slice(0, 200);
}
