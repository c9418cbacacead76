/**
 * `--merge-kubeconfig` (init, mini up): merges the cluster's admin kubeconfig into the user's kubeconfig
 * (the first file of KUBECONFIG, else ~/.kube/config) with @kubernetes/client-node's KubeConfig, keeps every other
 * cluster, user and context, replaces entries of the same name (this cluster's fresh credentials), and makes the
 * cluster's context the current one. A kubeconfig that cannot be parsed is left untouched; the write is atomic, 0600.
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
  admin.loadFromString((await readRegularFile(options.adminKubeconfig, { what: 'the kubeconfig', maxBytes: SIZE_LIMITS.kubeconfig })).toString('utf8'));
  const context = admin.getCurrentContext();
  if (!context) throw new UserError(`${options.adminKubeconfig} names no current context.`, { hint: 'Run `constellation init` again to write it anew.' });

  const user = new KubeConfig();
  let existing: string | undefined;
  try {
    existing = await fs.readFile(target, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new UserError(`Cannot read your kubeconfig ${target}: ${(err as Error).message}`, { cause: err });
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
  const replaced = <T extends { name: string }>(mine: readonly T[], theirs: readonly T[]) => [...mine.filter((m) => !theirs.some((t) => t.name === m.name)), ...theirs];
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

/**
 * client-node's loader is lenient (a file that is not a kubeconfig at all loads as an empty one, and would be
 * overwritten): a kubeconfig is a mapping whose clusters, users and contexts are lists of named entries.
 */
function checkKubeconfigShape(doc: unknown): void {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Error('it is not a YAML mapping');
  const record = doc as Record<string, unknown>;
  if (record.kind !== undefined && record.kind !== 'Config') throw new Error(`its kind is ${String(record.kind)}, not Config`);
  for (const key of ['clusters', 'users', 'contexts']) {
    const list = record[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list) || !list.every((e) => typeof (e as { name?: unknown })?.name === 'string')) throw new Error(`its ${key} is not a list of named entries`);
  }
}

/** mergeKubeconfig, then one line saying what it did (for the commands' --merge-kubeconfig). */
export async function mergeKubeconfigAndReport(adminKubeconfig: string, log: (line: string) => void): Promise<MergeKubeconfigResult> {
  const merged = await mergeKubeconfig({ adminKubeconfig });
  log(`Merged the cluster's kubeconfig into ${merged.file}; current context: ${merged.context}.`);
  return merged;
}

function firstLine(err: unknown): string {
  return String((err as Error).message ?? err).split('\n')[0].slice(0, 200);
}
