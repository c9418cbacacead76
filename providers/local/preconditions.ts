/**
 * What the local provider needs of this machine, checked before anything is started or written
 * (docs/getting-started.md): root (every node gets its own network namespace), the programs it runs (swtpm, ip,
 * nsenter, gocryptfs, fusermount3, etcd), /dev/fuse (the nodes' encrypted state directories), a
 * runtime folder for the nodes' sockets (./layout.ts) and the built node program. Every missing piece is named at
 * once, each with its fix, so one run tells the whole story; nothing here changes the machine.
 */
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { RUNTIME_ROOT } from './layout.js';
import { defaultNodeProgram } from './node-program.js';

/** Program → the Debian package that has it (scripts/ensure-system-deps.sh installs them: `npm run setup`). */
export const LOCAL_PROGRAMS: Record<string, string> = {
  swtpm: 'swtpm',
  ip: 'iproute2',
  nsenter: 'util-linux',
  gocryptfs: 'gocryptfs',
  fusermount3: 'fuse3',
  etcd: 'etcd-server',
};

export interface LocalPreconditionOptions {
  /** Default: this process's effective uid. */
  uid?: number;
  /** Default: $PATH. */
  searchPath?: string;
  fuseDevice?: string;
  runtimeRoot?: string;
  /** The node program the current build boots; default: dist/bootstrapper/main.js of this build. */
  nodeProgram?: string;
}

export interface Problem {
  problem: string;
  fix: string;
}

/** Every unmet precondition of the local provider; empty when all hold. */
export async function localProblems(options: LocalPreconditionOptions = {}): Promise<Problem[]> {
  const problems: Problem[] = [];
  const root = (options.uid ?? process.geteuid?.()) === 0;
  if (!root) {
    problems.push({
      problem: 'it needs root: every node runs in its own network namespace, which only root can make',
      fix: 'run the command as root, e.g. with sudo',
    });
  }
  const dirs = (options.searchPath ?? process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const missing = (
    await Promise.all(Object.keys(LOCAL_PROGRAMS).map(async (p) => ((await findProgram(p, dirs)) ? undefined : p)))
  ).filter((p): p is string => p !== undefined);
  if (missing.length > 0) {
    problems.push({
      problem: `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed`,
      fix: `run \`npm run setup\` (it installs the Debian packages ${[...new Set(missing.map((p) => LOCAL_PROGRAMS[p]))].join(', ')})`,
    });
  }
  const fuse = options.fuseDevice ?? '/dev/fuse';
  if (!(await exists(fuse))) {
    problems.push({
      problem: `${fuse} does not exist (the nodes' encrypted state directories are FUSE mounts)`,
      fix: 'load the fuse module (modprobe fuse), or run where /dev/fuse is available',
    });
  }
  const runtimeRoot = options.runtimeRoot ?? RUNTIME_ROOT;
  // Only root can write there: without root, the first problem says it all.
  if (
    root &&
    !(await writable(runtimeRoot)) &&
    ((await exists(runtimeRoot)) || !(await writable(path.dirname(runtimeRoot))))
  ) {
    problems.push({
      problem: `${runtimeRoot} cannot be written: the nodes' TPM sockets go there`,
      fix: `run as root on a machine with a writable ${path.dirname(runtimeRoot)}`,
    });
  }
  const program = options.nodeProgram ?? defaultNodeProgram().entry;
  if (!(await exists(program))) {
    problems.push({
      problem: `the node program ${program} is not built`,
      fix: 'run `npm run build` (or `npm run setup`)',
    });
  }
  return problems;
}

/** Throws one UserError naming every unmet precondition (see localProblems), before anything is done. */
export async function requireLocalPreconditions(options: LocalPreconditionOptions = {}): Promise<void> {
  const problems = await localProblems(options);
  if (problems.length === 0) return;
  const onlyRoot = problems.length === 1 && problems[0].problem.startsWith('it needs root');
  throw new UserError(
    onlyRoot
      ? 'The local provider needs root: its nodes run in their own network namespaces. Nothing was started or written.'
      : `The local provider cannot start here; nothing was started or written:\n${problems.map((p) => `  - ${p.problem}`).join('\n')}`,
    { hint: problems.map((p) => p.fix.charAt(0).toUpperCase() + p.fix.slice(1)).join('; ') + '.' },
  );
}

export async function findProgram(name: string, dirs: string[]): Promise<boolean> {
  for (const dir of dirs) {
    try {
      await fs.access(path.join(dir, name), constants.X_OK);
      return true;
    } catch {
      // not in this folder
    }
  }
  return false;
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return false;
  }
}

async function writable(dir: string): Promise<boolean> {
  try {
    await fs.access(dir, constants.W_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
