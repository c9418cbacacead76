/**
 * Start-up of the node program on this machine, bundled (dist/node-program/main.cjs, what local nodes and node
 * images run) against the module-by-module loading of the tsc output (dist/bootstrapper/main.js with node_modules/):
 * wall time from spawning `node <entry>` to its "bootstrapper started" log line (mode "waiting": it waits for init
 * or join), with the environment a local launcher gives it, a swtpm as its TPM and the local metadata server.
 * Runs are interleaved (bundled, modules, bundled, ...) so other load slows both alike; each run gets a fresh node
 * folder and state disk. Besides the wall time, the CPU seconds the node program's process spent until that line
 * (/proc/<pid>/stat): on a machine shared with other work they move far less than the wall time. Targets (issue 18):
 * the bundle starts no slower than the modules; inside the VM under TCG (bench vm-mini-up), ≤ 5 s.
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TpmClient } from '../lib/tpm/client.js';
import { startSwtpm } from '../lib/tpm/swtpm.js';
import { CloudRegistry, createMetadataServer } from '../providers/local/metadata-server.js';
import { loadAverage, processCpuSeconds } from './support/cpu-time.js';
import { median } from './support/stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env.BENCH_RUNS ?? 7);
/** Extra Node.js arguments for the node program, e.g. BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile it. */
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
/**
 * BENCH_NODE_WRAPPER=qemu-x86_64 runs Node.js under QEMU's user-mode emulation (TCG, as in a VM without KVM, but
 * without the emulated machine): a cheap stand-in for how code translated on first run weighs in the VM's start.
 */
const WRAPPER = process.env.BENCH_NODE_WRAPPER;
/** BENCH_PROGRAMS='a=/x/main.cjs,b=/y/main.mjs' compares other entries (e.g. two builds of the bundle), first over second. */
const PROGRAMS = process.env.BENCH_PROGRAMS
  ? process.env.BENCH_PROGRAMS.split(',').map((pair) => ({
      name: pair.split('=')[0]!,
      entry: path.resolve(pair.split('=')[1]!),
    }))
  : [
      { name: 'bundled (dist/node-program/main.cjs)', entry: path.join(ROOT, 'dist', 'node-program', 'main.cjs') },
      { name: 'modules (dist/bootstrapper/main.js)', entry: path.join(ROOT, 'dist', 'bootstrapper', 'main.js') },
    ];

/** Spawns the node program and resolves with the wall and CPU seconds until it logs that it started; then stops it. */
async function startOnce(entry: string, env: NodeJS.ProcessEnv, cwd: string): Promise<{ wall: number; cpu: number }> {
  const start = process.hrtime.bigint();
  const args = [...NODE_ARGS, entry];
  const child = spawn(WRAPPER ?? process.execPath, WRAPPER ? [process.execPath, ...args] : args, {
    cwd,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  try {
    return await new Promise<{ wall: number; cpu: number }>((resolve, reject) => {
      const onData = (d: Buffer) => {
        output += d.toString();
        if (output.includes('"bootstrapper started"'))
          resolve({ wall: Number(process.hrtime.bigint() - start) / 1e9, cpu: processCpuSeconds(child.pid!) });
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => reject(new Error(`${entry} exited with ${code} before it started: ${output}`)));
    });
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

export default async function nodeProgramStartup(out: (line: string) => void): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-bench-node-start-'));
  const gateway = `127.1.${2 + Math.floor(Math.random() * 248)}.1`;
  const ip = gateway.replace(/\.1$/, '.10');
  const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
  let metadata: http.Server | undefined;
  try {
    const tpm = await TpmClient.connect(swtpm.serverSocket);
    const ak = (await tpm.attestationKey()).publicArea;
    tpm.close(); // swtpm serves one connection: the node program's
    const registry = new CloudRegistry();
    registry.nodes.set('cp-0', {
      name: 'cp-0',
      role: 'control-plane',
      group: 'control_plane_default',
      address: ip,
      akPublic: Buffer.from(ak).toString('base64'),
    });
    metadata = createMetadataServer({ registry, gateway, controlToken: 'bench-token' });
    await new Promise<void>((resolve) => metadata!.listen(0, gateway, resolve));
    const metadataUrl = `http://${gateway}:${(metadata.address() as { port: number }).port}`;

    const samples = PROGRAMS.map(() => [] as number[]);
    const cpu = PROGRAMS.map(() => [] as number[]);
    for (let i = -1; i < RUNS; i++) {
      for (const [j, program] of PROGRAMS.entries()) {
        const nodeDir = path.join(dir, `run-${i + 1}-${j}`);
        await fs.mkdir(nodeDir);
        const env = {
          NODE_NAME: 'cp-0',
          NODE_IP: ip,
          NODE_ROLE: 'control-plane',
          METADATA_URL: metadataUrl,
          TPM_SOCKET: swtpm.serverSocket,
          STATE_DISK: path.join(nodeDir, 'state-disk'),
          STATE_DIR: path.join(nodeDir, 'state'),
          NODE_DIR: nodeDir,
        };
        const { wall, cpu: cpuSeconds } = await startOnce(program.entry, env, nodeDir);
        if (i >= 0) {
          // run -1 warms the file cache
          samples[j]!.push(wall);
          cpu[j]!.push(cpuSeconds);
        }
      }
    }
    out(
      `${RUNS} runs each, spawn → "bootstrapper started" (waiting for init or join), fastest (median); ${os.availableParallelism()} CPUs, load ${loadAverage()}`,
    );
    for (const [j, program] of PROGRAMS.entries()) {
      out(
        `${program.name.padEnd(40)} ${Math.min(...samples[j]!).toFixed(3)} s (${median(samples[j]!).toFixed(3)} s), CPU ${median(cpu[j]!).toFixed(3)} s (median)`,
      );
    }
    const ratio = median(samples[0]!) / median(samples[1]!);
    const cpuRatio = median(cpu[0]!) / median(cpu[1]!);
    out(
      `${PROGRAMS[0]!.name.split(' ')[0]} / ${PROGRAMS[1]!.name.split(' ')[0]} (medians): wall ${ratio.toFixed(2)}, CPU ${cpuRatio.toFixed(2)} (target ≤ 1: ${ratio <= 1 ? 'met' : 'NOT met'})`,
    );
  } finally {
    await new Promise((resolve) => (metadata ? metadata.close(resolve) : resolve(undefined)));
    await swtpm.stop();
    await fs.rm(dir, { recursive: true, force: true });
  }
}
