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
import { createKubeletCsr } from '../bootstrapper/kubelet-csr.js';
import { localInstanceInfo } from '../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../lib/attestation/vtpm-issuer.js';
import { TpmClient } from '../lib/tpm/client.js';
import { startSwtpm } from '../lib/tpm/swtpm.js';
import { CloudControl } from '../providers/local/cloud.js';
import { ClusterStore as LocalClusterRecord } from '../providers/local/cluster-record.js';
import { defaultNodeProgram } from '../providers/local/infrastructure.js';
import { clusterPaths, nodePaths } from '../providers/local/layout.js';
import { measureBoot, swtpmLauncherTpm } from '../providers/local/launcher.js';
import { findOwnedProcesses } from '../providers/local/processes.js';
import { attemptJoin } from '../test/e2e/support.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');
const TARGET_S = 2;

function cli(args: string[], ws: string): void {
  const res = spawnSync(process.execPath, [CLI, ...args, '-C', ws], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (res.status !== 0) throw new Error(`constellation ${args.join(' ')} exited with ${res.status}: ${res.stderr.toString()}`);
}

/** The control plane whose join service logged the newest issued ticket. */
async function lastServer(ws: string, names: string[]): Promise<string> {
  let best = { name: names[0], time: '' };
  for (const name of names) {
    const lines = (await fs.readFile(nodePaths(ws, name).log, 'utf8')).split('\n').filter((l) => l.includes('ticket issued'));
    const time = lines.length > 0 ? (JSON.parse(lines[lines.length - 1]) as { time: string }).time : '';
    if (time > best.time) best = { name, time };
  }
  return best.name;
}

export default async function failoverBench(out: (line: string) => void): Promise<void> {
  const ws = mkdtempSync(path.join(os.tmpdir(), 'cl-bench-failover-'));
  const swtpm = await startSwtpm({ stateDir: path.join(ws, 'probe-tpm') });
  let tpm: TpmClient | undefined;
  try {
    cli(['mini', 'up', '-c', '3', '-w', '1'], ws);
    // A node of the cluster's image, registered with the provider like every node, that joins on demand.
    const program = defaultNodeProgram();
    await measureBoot({ nodeBinary: process.execPath, ...program }, await swtpmLauncherTpm({ serverSocket: swtpm.serverSocket, ctrlSocket: swtpm.ctrlSocket }));
    tpm = await TpmClient.connect(swtpm.serverSocket);
    const record = (await LocalClusterRecord.load(clusterPaths(ws)))!.record;
    const control = new CloudControl(`http://${record.prefix}.1:${record.metadataPort}`, (await fs.readFile(clusterPaths(ws).controlToken, 'utf8')).trim());
    await control.registerNode('probe-0', { role: 'worker', group: 'worker_default', address: `${record.prefix}.250`, akPublic: Buffer.from((await tpm.attestationKey()).publicArea).toString('base64') });
    const issuer = new VtpmIssuer({ variant: 'local-vtpm', tpm, instanceInfo: localInstanceInfo('probe-0') });
    const { csr } = await createKubeletCsr('probe-0', '127.0.0.1');
    const join = () => attemptJoin(`${record.prefix}.1:30090`, issuer, { diskUuid: '7c0e1b2a-3d4f-4a5b-8c6d-7e8f9a0b1c2d', certificateRequest: Buffer.from(csr), isControlPlane: false, nodeName: 'probe-0' });
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
      if (Number(process.hrtime.bigint() - start) / 1e9 > 60) throw new Error(`no join within 60 s after the kill: ${attempt.error.message}`);
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    out(`machine: ${os.availableParallelism()} CPUs, load average ${os.loadavg()[0].toFixed(1)}`);
    out(
      `failover: SIGKILL of ${victim} (it issued the last ticket) → next successful join through the load balancer: ${seconds.toFixed(2)} s ` +
        `(${attempts} attempt${attempts === 1 ? '' : 's'}; target < ${TARGET_S} s: ${seconds < TARGET_S ? 'met' : 'NOT met'})`,
    );
  } finally {
    tpm?.close();
    await swtpm.stop();
    spawnSync(process.execPath, [CLI, 'terminate', '-y', '-C', ws], { stdio: 'ignore' });
    rmSync(ws, { recursive: true, force: true });
  }
}
