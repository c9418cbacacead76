/**
 * The node launcher: plays firmware for one local node. Run detached by the CLI side (one per node, once per boot)
 * as `node launcher.js <node folder>/launch.json`, it
 *   1. resets the node's TPM through swtpm's control channel (PCRs back to zero: a reboot),
 *   2. measures the node image (./image-measurement.ts) into PCR 4, 9 and 11 of every allocated SHA-256/SHA-384 bank,
 *   3. closes its TPM connection (swtpm serves one connection at a time) and starts the node program with
 *      NODE_NAME, NODE_IP, NODE_ROLE, METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR, NODE_DIR and KUBERNETES_BACKEND,
 *   4. reports {type:'ready', programPid} over IPC, then stays the node program's parent: it passes SIGTERM/SIGINT on
 *      and exits with the program. It restarts nothing on its own; rebooting is the provider's job.
 * Its stdout/stderr (and the node program's) go to the node's node.log.
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BANK_ALGORITHMS, imageEventDigests, MEASURED_PCRS, TPM_ALG_ID, type NodeImage } from './image-measurement.js';
import { nodeArgsFor, reportStartup } from './processes.js';

export const launchConfigSchema = z.object({
  name: z.string(),
  role: z.enum(['control-plane', 'worker']),
  address: z.string(),
  metadataUrl: z.string(),
  nodeDir: z.string(),
  stateDisk: z.string(),
  stateDir: z.string(),
  tpm: z.object({ serverSocket: z.string(), ctrlSocket: z.string() }),
  image: z.object({ nodeBinary: z.string(), imageDir: z.string(), entry: z.string() }),
  /** The config's provider.local.kubernetesBackend. */
  kubernetesBackend: z.enum(['none', 'kubeadm']).default('none'),
  /** The image's version: "local" for the current build. */
  imageVersion: z.string().min(1).default('local'),
});
export type LaunchConfig = z.infer<typeof launchConfigSchema>;

/** The TPM operations the launcher needs (swtpmLauncherTpm below; tests may pass others). */
export interface LauncherTpm {
  /** TPM reset + Startup: PCRs back to zero. */
  powerCycle(): Promise<void>;
  /** Extends each PCR with those of the given digests whose bank the TPM has allocated. */
  extend(pcrDigests: Map<number, { hashAlg: number; digest: Uint8Array }[]>): Promise<void>;
}

/** Steps 1 and 2: reset the TPM and measure the image. */
export async function measureBoot(image: NodeImage, tpm: LauncherTpm): Promise<void> {
  await tpm.powerCycle();
  const digests = await imageEventDigests(image);
  const perPcr = new Map<number, { hashAlg: number; digest: Uint8Array }[]>();
  for (const pcr of MEASURED_PCRS) {
    perPcr.set(
      pcr,
      BANK_ALGORITHMS.map((alg) => ({ hashAlg: TPM_ALG_ID[alg], digest: digests[alg][pcr] })),
    );
  }
  await tpm.extend(perPcr);
}

/** The node program's environment: how it finds its identity, its TPM, its disk and the metadata server. */
export function nodeProgramEnv(config: LaunchConfig): Record<string, string> {
  return {
    NODE_NAME: config.name,
    NODE_IP: config.address,
    NODE_ROLE: config.role,
    METADATA_URL: config.metadataUrl,
    TPM_SOCKET: config.tpm.serverSocket,
    STATE_DISK: config.stateDisk,
    STATE_DIR: config.stateDir,
    NODE_DIR: config.nodeDir,
    KUBERNETES_BACKEND: config.kubernetesBackend,
    IMAGE_VERSION: config.imageVersion,
  };
}

/** The launcher's TPM operations on a swtpm (lib/tpm). */
export async function swtpmLauncherTpm(tpm: LaunchConfig['tpm']): Promise<LauncherTpm> {
  const [{ powerCycleSwtpm }, { TpmClient }] = await Promise.all([import('../../lib/tpm/swtpm.js'), import('../../lib/tpm/client.js')]);
  return {
    powerCycle: () => powerCycleSwtpm(tpm.ctrlSocket, { serverSocket: tpm.serverSocket }),
    async extend(pcrDigests) {
      const client = await TpmClient.connect(tpm.serverSocket);
      try {
        const allocated = new Set((await client.pcrBanks()).map((b) => b.hashAlg));
        for (const [pcr, digests] of pcrDigests) {
          const inBanks = digests.filter((d) => allocated.has(d.hashAlg));
          if (inBanks.length === 0) throw new Error('the TPM has neither a SHA-256 nor a SHA-384 PCR bank');
          await client.pcrExtend(pcr, inBanks);
        }
      } finally {
        client.close();
      }
    },
  };
}

const stamp = () => new Date().toISOString();

async function main(configFile: string): Promise<void> {
  let config: LaunchConfig;
  try {
    config = launchConfigSchema.parse(JSON.parse(await fs.readFile(configFile, 'utf8')));
    console.log(`${stamp()} launcher: booting ${config.name} (${config.role}) at ${config.address}`);
    await measureBoot(config.image, await swtpmLauncherTpm(config.tpm));
    console.log(`${stamp()} launcher: measured ${config.image.imageDir} into PCR 4, 9, 11`);
  } catch (err) {
    console.error(`${stamp()} launcher: boot failed: ${(err as Error).message}`);
    reportStartup({ type: 'error', message: (err as Error).message });
    process.exitCode = 1;
    return;
  }
  const program = spawn(config.image.nodeBinary, nodeArgsFor(config.image.entry), {
    cwd: config.nodeDir,
    env: { ...process.env, ...nodeProgramEnv(config) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  program.once('error', (err) => {
    console.error(`${stamp()} launcher: cannot start ${config.image.entry}: ${err.message}`);
    reportStartup({ type: 'error', message: err.message });
    process.exitCode = 1;
  });
  program.once('spawn', () => {
    console.log(`${stamp()} launcher: started ${config.image.entry} (pid ${program.pid})`);
    reportStartup({ type: 'ready', programPid: program.pid });
  });
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => program.kill(sig));
  program.once('exit', (code, sig) => {
    console.log(`${stamp()} launcher: node program exited (${sig ?? `code ${code}`})`);
    process.exit(code ?? 1);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void main(process.argv[2] ?? '');
