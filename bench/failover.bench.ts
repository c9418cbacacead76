/**
 * Failover of the join service (issue 10): on a local 3 + 1 cluster (built CLI), the control plane whose join service
 * issued the last ticket is killed with SIGKILL (every process of the node, as a power cut), and a registered node
 * asks the load balancer for a ticket again and again until it gets one. Target: kill → next successful join < 2 s.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultNodeProgram } from '../providers/local/infrastructure.js';
import { nodePaths } from '../providers/local/layout.js';
import { readState } from '../lib/workspace/state.js';
import { findOwnedProcesses } from '../providers/local/processes.js';
import { startProbeNode, type ProbeNode } from '../test/e2e/support.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const TARGET_S = 2;

function cli(args: string[], ws: string): void {
  const res = spawnSync(process.execPath, [CLI, ...args, '-C', ws], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (res.status !== 0)
    throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
}

/** The control plane whose join service logged the newest issued ticket. */
async function lastServer(ws: string, names: string[]): Promise<string> {
  let best = { name: names[0], time: '' };
  for (const name of names) {
    const lines = (await fs.readFile(nodePaths(ws, name).log, 'utf8'))
      .split('\n')
      .filter((l) => l.includes('ticket issued'));
    const time = lines.length > 0 ? (JSON.parse(lines[lines.length - 1]) as { time: string }).time : '';
    if (time > best.time) best = { name, time };
  }
  return best.name;
}

export default async function failoverBench(out: (line: string) => void): Promise<void> {
  const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-failover-'));
  let probe: ProbeNode | undefined;
  try {
    cli(['mini', 'up', '-c', '3', '-w', '1'], ws);
    // A node of the cluster's image, registered with the provider like every node, that joins on demand.
    probe = await startProbeNode(ws, defaultNodeProgram(), 'probe-0', path.join(ws, 'probe-tpm'));
    const lb = (await readState(ws)).infrastructure.clusterEndpoint;
    const join = () => probe!.join(`${lb}:30090`);
    const first = await join();
    if (first.error) throw first.error;

    const victim = await lastServer(ws, ['control-plane-0', 'control-plane-1', 'control-plane-2']);
    const pids = await findOwnedProcesses(nodePaths(ws, victim).dir);
    const start = process.hrtime.bigint();
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    let attempts = 0;
    for (;;) {
      attempts++;
      const attempt = await join();
      if (!attempt.error) break;
      if (Number(process.hrtime.bigint() - start) / 1e9 > 60)
        throw new Error(`no join within 60 s after the kill: ${attempt.error.message}`);
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)}`);
    out(
      `failover: SIGKILL of ${victim} (it issued the last ticket) → next successful join through the load balancer: ${seconds.toFixed(2)} s ` +
        `(${attempts} attempt${attempts === 1 ? '' : 's'}; target < ${TARGET_S} s: ${seconds < TARGET_S ? 'met' : 'NOT met'})`,
    );
  } finally {
    await probe?.close();
    spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
    rmSync(ws, { recursive: true, force: true });
  }
}
