/**
 * CPU seconds (user + system) that a command and every process it starts spend, detached ones included: `mini up`
 * leaves swtpm, launchers, node programs, etcd and the cloud daemon running in their own sessions, which no parent
 * waits for, so neither the CLI's rusage nor `time` sees them. A fresh cgroup does: the command is started inside
 * it (`sh -c 'echo $$ > <group>/cgroup.procs; exec …'`), everything it forks stays in it, and the group's counter
 * keeps what exited processes spent. cgroup v1's cpuacct hierarchy or cgroup v2 (both need root, as the local
 * provider does); where neither can be written the benches say "CPU not measured" instead of a number that misses
 * most of the work. On a machine shared with other work the CPU seconds move far less than the wall time: the
 * benches print both, with the load average.
 */
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';

export interface CpuGroup {
  /** Where the numbers come from, for the bench's output. */
  readonly source: string;
  /** The command line that runs `file args` inside the group. */
  wrap(file: string, args: string[]): { file: string; args: string[] };
  /** CPU seconds spent so far by everything that ran in the group. */
  seconds(): Promise<number>;
  /** Removes the group (waits up to 5 s for its last processes to be gone). */
  close(): Promise<void>;
}

const V1_CPUACCT = '/sys/fs/cgroup/cpuacct';
const V2_ROOT = '/sys/fs/cgroup';

let groups = 0;

/** A fresh cgroup for CPU accounting, or undefined where this machine gives none to this process. */
export async function openCpuGroup(name: string): Promise<CpuGroup | undefined> {
  const leaf = `cl-bench-${name}-${process.pid}-${++groups}`;
  const v2 = await fs.access(path.join(V2_ROOT, 'cgroup.controllers')).then(
    () => true,
    () => false,
  );
  const candidates = v2
    ? [{ dir: path.join(V2_ROOT, leaf), source: 'cgroup v2 cpu.stat', read: readV2 }]
    : [{ dir: path.join(V1_CPUACCT, leaf), source: 'cgroup v1 cpuacct.usage', read: readV1 }];
  for (const c of candidates) {
    try {
      await fs.mkdir(c.dir);
    } catch {
      continue;
    }
    return {
      source: c.source,
      wrap: (file, args) => ({
        file: 'sh',
        args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', c.dir, file, ...args],
      }),
      seconds: () => c.read(c.dir),
      close: () => removeGroup(c.dir),
    };
  }
  return undefined;
}

async function readV1(dir: string): Promise<number> {
  return Number((await fs.readFile(path.join(dir, 'cpuacct.usage'), 'utf8')).trim()) / 1e9;
}

async function readV2(dir: string): Promise<number> {
  const line = (await fs.readFile(path.join(dir, 'cpu.stat'), 'utf8'))
    .split('\n')
    .find((l) => l.startsWith('usage_usec '));
  return Number(line?.split(' ')[1] ?? NaN) / 1e6;
}

async function removeGroup(dir: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    try {
      await fs.rmdir(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`the CPU accounting group ${dir} still has processes; remove it by hand (rmdir) once they are gone`);
}

/** CPU seconds (user + system) a live process has spent so far (/proc/<pid>/stat), without its children. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  // Fields after the parenthesised command name: state is field 3; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** USER_HZ: 100 on every Linux architecture Node.js runs on. */
const CLOCK_TICKS = 100;

/** The 1-, 5- and 15-minute load averages ("2.10 1.95 1.80"), for a bench's output. */
export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'latin1').split(' ').slice(0, 3).join(' ');
}
