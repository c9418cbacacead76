/**
 * The local provider's long-lived processes (cloud daemon, node launchers, swtpm): started detached so they outlive
 * the CLI, found again from any later CLI process, and stopped only when they provably are ours.
 *
 * Ownership: every process we spawn carries CONSTELLATION_LOCAL_OWNER=<its folder> in its environment (the node
 * program inherits it from its launcher); swtpm is recognised by its command line naming the node's TPM folder.
 * A recorded PID is killed only when it still matches (PIDs get reused), and a sweep finds what a killed CLI never
 * got to record. Linux /proc is the source of truth; the local provider runs on Linux only.
 * A process meant for a network namespace (./network.ts) starts as `nsenter --net=<namespace> -- node …`: nsenter
 * enters only the network namespace and then executes Node.js in its place (same PID, environment and IPC channel),
 * so the process stays in the root mount namespace, where its FUSE mounts are visible to the provider.
 */
import { spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { detachMountsUnder } from '../../lib/mounts.js';
import { pollUntil } from '../../lib/poll.js';
import { openRegularFileForAppend } from '../../lib/workspace/regular-file.js';
import { netnsPath } from './network.js';

export const OWNER_ENV = 'CONSTELLATION_LOCAL_OWNER';
const SWTPM_PROGRAMS = new Set(['swtpm', 'swtpm_setup']);

/** Node.js arguments that run a module file: TypeScript sources (tests, development) go through the tsx loader. */
export function nodeArgsFor(file: string): string[] {
  return file.endsWith('.ts')
    ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href, file]
    : [file];
}

/**
 * A program the CLI starts detached (the node launcher, the cloud daemon): from a build, its CommonJS bundle
 * (dist/cli-bundle/<name>.cjs, made by scripts/bundle-cli.mjs), as Node.js loads one file faster than a dozen ES
 * modules (about 35 ms of CPU less per start here, and a local cluster starts one launcher per node boot); from the
 * sources, its module.
 */
export function detachedProgram(name: 'launcher' | 'cloud-daemon'): string {
  const module = siblingModule(name);
  return module.endsWith('.ts') ? module : fileURLToPath(new URL(`../../cli-bundle/${name}.cjs`, import.meta.url));
}

/** A sibling module of this one, as a file: `.ts` when running from source, `.js` when running from dist/. */
export function siblingModule(name: string): string {
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return fileURLToPath(new URL(`./${name}${ext}`, import.meta.url));
}

/** First message a detached child sends over IPC: it is up, or it failed (with an errno-like code when it has one). */
export type StartupMessage =
  { type: 'ready'; [key: string]: unknown } | { type: 'error'; message: string; code?: string };

/**
 * Child side: sends the startup message and lets go of the IPC channel (after the message is written), so the
 * CLI can exit. The CLI may be gone already (killed mid-create); then nobody listens, which is fine.
 */
export function reportStartup(message: StartupMessage): void {
  if (!process.connected || !process.send) return;
  process.send(message, undefined, undefined, () => {
    if (process.connected) process.disconnect();
  });
}

/**
 * Variables that change how Node.js itself runs rather than what our program does: NODE_OPTIONS (flags, and
 * `--require` of any file), NODE_EXTRA_CA_CERTS, NODE_TLS_REJECT_UNAUTHORIZED, NODE_PATH, NODE_V8_COVERAGE and every
 * other NODE_* of Node.js, libuv's UV_*, and OPENSSL_CONF (crypto providers).
 */
const NODE_RUNTIME_VARIABLE = /^(NODE_|UV_|OPENSSL_CONF$)/;

/**
 * The environment of a process we start, without Node.js's own variables (NODE_RUNTIME_VARIABLE): a node runs the
 * program its image holds and the launcher measured, not code or settings from the shell that ran the CLI
 * (docs/workflows/local-provider.md, "The node program's environment"). It also spares each start what the shell's
 * variables cost: NODE_EXTRA_CA_CERTS alone makes Node.js parse a CA bundle before it runs anything (about 65 ms of a
 * start on this project's 2-core test machine, where the environment sets it).
 */
export function withoutNodeRuntimeVariables(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !NODE_RUNTIME_VARIABLE.test(name)));
}

export interface DetachedSpawn {
  file: string;
  args: string[];
  /** The folder that owns the process (becomes CONSTELLATION_LOCAL_OWNER). */
  owner: string;
  cwd: string;
  /** stdout and stderr are appended here. */
  logFile: string;
  /** The Node.js binary to run it with; default: the one running this process. */
  execPath?: string;
  /** The named network namespace to run it in (default: this process's). */
  netns?: string;
  /** The nice value of its session (setSessionNice); default: that of a new session, 0. */
  sessionNice?: number;
  /** Called once the process runs, before its startup message. */
  spawned?: () => void;
}

/**
 * Starts a Node.js module in its own session (process group leader, survives the CLI) and waits for its first IPC
 * message. Afterwards the CLI holds no handle on it.
 */
export async function spawnDetached(options: DetachedSpawn): Promise<{ pid: number; message: StartupMessage }> {
  const log = await openRegularFileForAppend(options.logFile, { what: 'the node log', mode: 0o600 });
  try {
    const command = [options.execPath ?? process.execPath, ...nodeArgsFor(options.file), ...options.args];
    const [file, ...args] = options.netns
      ? ['nsenter', `--net=${netnsPath(options.netns)}`, '--', ...command]
      : command;
    const child = spawn(file, args, {
      cwd: options.cwd,
      detached: true,
      env: { ...withoutNodeRuntimeVariables(process.env), [OWNER_ENV]: options.owner },
      stdio: ['ignore', log.fd, log.fd, 'ipc'],
    });
    // Its session exists now: spawn() returns once the child ran setsid() and exec'd.
    if (options.sessionNice !== undefined && child.pid !== undefined)
      await setSessionNice(child.pid, options.sessionNice);
    if (child.pid !== undefined) options.spawned?.();
    const message = await new Promise<StartupMessage>((resolve) => {
      const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
        resolve({
          type: 'error',
          message: `exited (${signal ?? `code ${code}`}) before it was ready; see ${options.logFile}`,
        });
      child.once('message', (m) => {
        child.off('exit', onExit);
        resolve(m as StartupMessage);
      });
      child.once('exit', onExit);
      child.once('error', (err) => resolve({ type: 'error', message: err.message }));
    });
    if (child.connected) child.disconnect();
    child.unref();
    if (child.pid === undefined)
      throw new Error(`could not start ${options.file}: ${message.type === 'error' ? message.message : ''}`);
    return { pid: child.pid, message };
  } finally {
    await log.close();
  }
}

/** The session nice value of a node that starts in the background (MachineNode.background). */
export const BACKGROUND_NICE = 10;

/**
 * Sets the CPU priority of the session (process group leader's autogroup) the process leads. With autogroups, which
 * Debian's kernel enables, the scheduler shares the CPU between sessions first, whatever the nice values of the
 * processes in them: a detached process started with `nice` competes as an equal of every other session. A session
 * at nice 10 gets about a tenth of a nice-0 session's share when both want the CPU. Best effort: without autogroups
 * (no /proc/<pid>/autogroup), or once the process is gone, nothing changes.
 */
export async function setSessionNice(pid: number, nice: number): Promise<void> {
  await fs.writeFile(`/proc/${pid}/autogroup`, `${nice}\n`).catch(() => undefined);
}

/**
 * A /proc file of the process, or undefined when it is gone. Read synchronously: the kernel makes these files in
 * memory, so a read never waits for a disk, and a sweep of every process of the machine (findOwnedProcesses,
 * processesByOwner) costs a fraction of what a thread-pool round trip per file did (about a second of the
 * CLI's CPU in a profile of mini up 1+9 on this machine with ~150 other processes).
 */
async function readProc(pid: number, file: string): Promise<Buffer | undefined> {
  try {
    return readFileSync(`/proc/${pid}/${file}`);
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie. */
export async function isAlive(pid: number): Promise<boolean> {
  const stat = await readProc(pid, 'stat');
  if (!stat) return false;
  // Field 3 (state) follows the parenthesised command name, which may itself contain spaces or parentheses.
  const text = stat.toString('latin1');
  const state = text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

function underFolder(value: string, folder: string): boolean {
  return value === folder || value.startsWith(`${folder}/`);
}

/**
 * Whether the process belongs to `folder` (a node folder, or the cluster folder for everything of the cluster) and
 * is alive. The owner mark and the command line are read first and the state only of a match: most processes a
 * sweep looks at are not ours.
 */
export async function isOwnedBy(pid: number, folder: string): Promise<boolean> {
  if (pid === process.pid) return false;
  return (await isMarkedOrSwtpmOf(pid, folder)) && (await isAlive(pid));
}

async function isMarkedOrSwtpmOf(pid: number, folder: string): Promise<boolean> {
  const environ = await readProc(pid, 'environ');
  if (environ) {
    for (const entry of environ.toString('utf8').split('\0')) {
      if (entry.startsWith(`${OWNER_ENV}=`) && underFolder(entry.slice(OWNER_ENV.length + 1), folder)) return true;
    }
  }
  const cmdline = await readProc(pid, 'cmdline');
  if (!cmdline) return false;
  const argv = cmdline.toString('utf8').split('\0');
  // swtpm (and swtpm_setup, which a killed CLI may leave running) name the node's TPM folder on their command line
  // (--tpmstate dir=<node>/tpm, --log file=<node>/tpm/swtpm.log; its sockets are in the runtime folder, ./layout.ts).
  return (
    SWTPM_PROGRAMS.has(path.basename(argv[0] ?? '')) &&
    argv.some((arg) => arg.split(/[=,]/).some((part) => underFolder(part, folder)))
  );
}

/**
 * What of the local cluster in `clusterDir` (its constellation-local/ folder) runs, one line per owner: the cloud
 * daemon and each node (launcher, node program, what it started, its swtpm). For the message of an interrupted
 * command: these processes run on by design, and the same command continues with them.
 */
export async function describeClusterProcesses(clusterDir: string): Promise<string[]> {
  return [...(await processesByOwner(clusterDir))]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([owner, list]) => {
      const [first, name] = path.relative(clusterDir, owner).split(path.sep);
      const what =
        first === 'nodes' && name ? `node ${name}` : first === 'cloud' ? 'metadata server and load balancer' : owner;
      return `${what}: PID${list.length === 1 ? '' : 's'} ${list.sort((a, b) => a - b).join(', ')}`;
    });
}

/**
 * One sweep of every process of the machine: the live processes of the local cluster in `clusterDir` (its
 * constellation-local/ folder), by the folder that owns them (a node folder, or the cloud daemon's). A folder that is
 * not in the map had no process at the time of the sweep, and none can appear later but those the caller starts:
 * only a process of the folder (which passes its owner mark on) or the CLI holding the workspace lock makes them.
 * Creating a cluster sweeps once for all nodes instead of once per node (findOwnedProcesses).
 */
export async function processesByOwner(clusterDir: string): Promise<Map<string, number[]>> {
  const pids = (await fs.readdir('/proc')).filter((e) => /^\d+$/.test(e)).map(Number);
  const byOwner = new Map<string, number[]>();
  for (const pid of pids) {
    const owner = await ownerFolderOf(pid, clusterDir);
    if (owner !== undefined) byOwner.set(owner, [...(byOwner.get(owner) ?? []), pid]);
  }
  return byOwner;
}

/**
 * The folder below `clusterDir` (a node folder, or the cloud daemon's) that owns the process, if any. The owner mark
 * and the command line are read first and the state only of a match: most processes a sweep looks at are not ours.
 */
async function ownerFolderOf(pid: number, clusterDir: string): Promise<string | undefined> {
  if (pid === process.pid) return undefined;
  const environ = await readProc(pid, 'environ');
  const owner = environ
    ?.toString('utf8')
    .split('\0')
    .find((entry) => entry.startsWith(`${OWNER_ENV}=`))
    ?.slice(OWNER_ENV.length + 1);
  // As isOwnedBy: the owner mark, else a swtpm's folders (a swtpm that carries another folder's mark is still ours).
  let under = owner !== undefined && underFolder(owner, clusterDir) ? owner : undefined;
  under ??= (await swtpmFolders(pid)).find((c) => underFolder(c, clusterDir));
  if (under === undefined || !(await isAlive(pid))) return undefined;
  const parts = path.relative(clusterDir, under).split(path.sep);
  return path.join(clusterDir, ...parts.slice(0, parts[0] === 'nodes' ? 2 : 1));
}

/** The paths a swtpm (or swtpm_setup) process names on its command line; none for other programs. */
async function swtpmFolders(pid: number): Promise<string[]> {
  const argv = ((await readProc(pid, 'cmdline'))?.toString('utf8') ?? '').split('\0');
  if (!SWTPM_PROGRAMS.has(path.basename(argv[0] ?? ''))) return [];
  return argv.flatMap((arg) => arg.split(/[=,]/)).filter((part) => part.startsWith('/'));
}

/** Every live process that belongs to `folder`. */
export async function findOwnedProcesses(folder: string): Promise<number[]> {
  const pids = (await fs.readdir('/proc')).filter((e) => /^\d+$/.test(e)).map(Number);
  return filterAsync(pids, (pid) => isOwnedBy(pid, folder));
}

function signal(pid: number, sig: NodeJS.Signals, group: boolean): void {
  try {
    process.kill(group ? -pid : pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** Resolves with the PIDs still alive once all are gone or `timeoutMs` passed. */
async function waitGone(pids: number[], timeoutMs: number): Promise<number[]> {
  let alive = pids;
  return pollUntil(
    async () => {
      alive = await filterAsync(alive, isAlive);
      return alive.length === 0 ? alive : undefined;
    },
    { timeoutMs, intervalMs: 20, onTimeout: () => alive },
  );
}

/**
 * Stops the recorded PIDs that still belong to `folder`, their process groups (a launcher's node program and its
 * children), and any other process of `folder` except `keep`, in the order a machine shuts down:
 *   1. SIGTERM to the recorded processes alone: a node program stops what it started in order (its etcd member
 *      before the state disk that member writes to) and exits;
 *   2. SIGTERM to what is left of `folder`, file system servers (gocryptfs) last, then to the recorded processes'
 *      groups (children that carry no owner mark);
 *   3. SIGKILL to whatever is still there after `graceMs` in all.
 * Signalling everything at once let gocryptfs unmount a state disk while etcd was still writing to it. Resolves when
 * all are gone, and the FUSE mounts below `folder` whose servers were among them are detached. PIDs that are gone
 * already or belong to someone else now are left alone.
 */
export async function stopOwnedProcesses(
  folder: string,
  recorded: number[],
  options: { graceMs?: number; keep?: number[] } = {},
): Promise<void> {
  const keep = new Set(options.keep ?? []);
  const ours = async (pid: number) => !keep.has(pid) && (await isOwnedBy(pid, folder));
  // Each once, though callers often record a PID twice (the cluster record and the journal).
  const leaders = await filterAsync([...new Set(recorded)], ours);
  const targets = [...new Set([...leaders, ...(await findOwnedProcesses(folder)).filter((pid) => !keep.has(pid))])];
  if (targets.length === 0) return detachMountsUnder(folder);
  const deadline = Date.now() + (options.graceMs ?? 3000);
  const left = () => Math.max(0, deadline - Date.now());

  for (const pid of leaders) signal(pid, 'SIGTERM', false);
  await waitGone(leaders, left());
  const rest = await filterAsync(targets, isAlive);
  const servers = new Set(await filterAsync(rest, isFileSystemServer));
  const plain = rest.filter((pid) => !servers.has(pid));
  for (const pid of plain) signal(pid, 'SIGTERM', false);
  await waitGone(plain, left());
  for (const pid of servers) signal(pid, 'SIGTERM', false);
  for (const pid of leaders) signal(pid, 'SIGTERM', true);
  const stubborn = await waitGone(targets, left());

  for (const pid of stubborn) signal(pid, 'SIGKILL', false);
  for (const pid of leaders) signal(pid, 'SIGKILL', true);
  const survivors = await waitGone(stubborn, 2000);
  if (survivors.length > 0)
    throw new Error(`processes ${survivors.join(', ')} of ${folder} did not exit after SIGKILL`);
  await detachMountsUnder(folder);
}

/** Programs that serve a mounted file system: stopped after everything that may still write to it. */
const FILE_SYSTEM_SERVERS = new Set(['gocryptfs']);

async function isFileSystemServer(pid: number): Promise<boolean> {
  const comm = await readProc(pid, 'comm');
  return comm !== undefined && FILE_SYSTEM_SERVERS.has(comm.toString('utf8').trim());
}

/** The items for which `predicate` holds, asked of all at once, in their order. */
async function filterAsync<T>(items: T[], predicate: (item: T) => Promise<boolean>): Promise<T[]> {
  const keep = await Promise.all(items.map(predicate));
  return items.filter((_, i) => keep[i]);
}
