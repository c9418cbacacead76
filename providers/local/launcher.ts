/**
 * The node launcher: plays firmware for one local node. Run detached by the CLI side (one per node, once per boot)
 * as `node launcher.cjs <node folder>/launch.json` (its bundle, see ./processes.ts detachedProgram), it
 *   1. resets the node's TPM through swtpm's control channel (PCRs back to zero: a reboot),
 *   2. measures the node image (./image-pcrs.ts) into PCR 4, 9 and 11 of every allocated SHA-256/SHA-384 bank,
 *   3. closes its TPM connection (swtpm serves one connection at a time), sets NODE_NAME, NODE_IP, NODE_ROLE,
 *      METADATA_URL, TPM_SOCKET, STATE_DISK, STATE_DIR, NODE_DIR, KUBERNETES_BACKEND and IMAGE_VERSION,
 *   4. reports {type:'ready', programPid} over IPC and runs the node program in this same process (it imports the
 *      entry and calls its exported main(), if any). It restarts nothing on its own; rebooting is the provider's job.
 * Its stdout/stderr (and the node program's) go to the node's node.log.
 *
 * The node program is the bundle of dist/node-program/ (providers/local/node-program.ts), which loads nothing from
 * node_modules/; the launcher runs in the same process, so it imports no package either (the launch config is
 * checked by hand below, not with a schema library): nothing of the node's process comes from node_modules/.
 * The launcher itself is not measured: it is the node's firmware (docs/workflows/local-provider.md).
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { FileDigestCache } from './digest-cache.js';
import { BANK_ALGORITHMS, imageEventDigests, MEASURED_PCRS, TPM_ALG_ID, type NodeImage } from './image-pcrs.js';
import { reportStartup } from './processes.js';

export interface LaunchConfig {
  name: string;
  role: 'control-plane' | 'worker';
  address: string;
  metadataUrl: string;
  nodeDir: string;
  stateDisk: string;
  stateDir: string;
  tpm: { serverSocket: string; ctrlSocket: string };
  image: NodeImage;
  /** The config's provider.local.kubernetesBackend (default none). */
  kubernetesBackend: 'none' | 'kubeadm';
  /** The cluster's digest cache of image files (./digest-cache.ts). */
  digestCache?: string;
  /** The image's version: "local" for the current build (the default). */
  imageVersion: string;
}

/** Checks a parsed launch.json (written by the provider, ./process-machine.ts); throws naming the first bad field. */
export function parseLaunchConfig(value: unknown): LaunchConfig {
  const object = (v: unknown, where: string): Record<string, unknown> => {
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      throw new Error(`launch config: ${where} must be an object`);
    return v as Record<string, unknown>;
  };
  const text = (o: Record<string, unknown>, key: string, where = key): string => {
    if (typeof o[key] !== 'string') throw new Error(`launch config: ${where} must be a string`);
    return o[key] as string;
  };
  const config = object(value, 'the file');
  const tpm = object(config.tpm, 'tpm');
  const image = object(config.image, 'image');
  const role = text(config, 'role');
  if (role !== 'control-plane' && role !== 'worker')
    throw new Error('launch config: role must be control-plane or worker');
  const kubernetesBackend = config.kubernetesBackend ?? 'none';
  if (kubernetesBackend !== 'none' && kubernetesBackend !== 'kubeadm')
    throw new Error('launch config: kubernetesBackend must be none or kubeadm');
  if (config.digestCache !== undefined) text(config, 'digestCache');
  const imageVersion = config.imageVersion === undefined ? 'local' : text(config, 'imageVersion');
  if (imageVersion === '') throw new Error('launch config: imageVersion must not be empty');
  return {
    name: text(config, 'name'),
    role,
    address: text(config, 'address'),
    metadataUrl: text(config, 'metadataUrl'),
    nodeDir: text(config, 'nodeDir'),
    stateDisk: text(config, 'stateDisk'),
    stateDir: text(config, 'stateDir'),
    tpm: {
      serverSocket: text(tpm, 'serverSocket', 'tpm.serverSocket'),
      ctrlSocket: text(tpm, 'ctrlSocket', 'tpm.ctrlSocket'),
    },
    image: {
      nodeBinary: text(image, 'nodeBinary', 'image.nodeBinary'),
      imageDir: text(image, 'imageDir', 'image.imageDir'),
      entry: text(image, 'entry', 'image.entry'),
    },
    kubernetesBackend,
    digestCache: config.digestCache as string | undefined,
    imageVersion,
  };
}

/** The TPM operations the launcher needs (swtpmLauncherTpm below; tests may pass others). */
export interface LauncherTpm {
  /** TPM reset + Startup: PCRs back to zero. */
  powerCycle(): Promise<void>;
  /** Extends each PCR with those of the given digests whose bank the TPM has allocated. */
  extend(pcrDigests: Map<number, { hashAlg: number; digest: Uint8Array }[]>): Promise<void>;
}

/** Steps 1 and 2: reset the TPM and measure the image. */
export async function measureBoot(image: NodeImage, tpm: LauncherTpm, cache?: FileDigestCache): Promise<void> {
  await tpm.powerCycle();
  const digests = await imageEventDigests(image, cache);
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
  const [{ powerCycleSwtpm }, { TpmClient }] = await Promise.all([
    import('../../lib/tpm/swtpm.js'),
    import('../../lib/tpm/client.js'),
  ]);
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

/** The launcher's main: run by its bundle (dist/cli-bundle/launcher.cjs) or as this module (from the sources). */
export async function runLauncher(configFile: string): Promise<void> {
  let config: LaunchConfig;
  try {
    config = parseLaunchConfig(
      JSON.parse(
        (await readRegularFile(configFile, { what: 'the launch config', maxBytes: SIZE_LIMITS.nodeFile })).toString(
          'utf8',
        ),
      ),
    );
    console.log(`${stamp()} launcher: booting ${config.name} (${config.role}) at ${config.address}`);
    await measureBoot(config.image, await swtpmLauncherTpm(config.tpm), new FileDigestCache(config.digestCache));
    console.log(`${stamp()} launcher: measured ${config.image.imageDir} into PCR 4, 9, 11`);
  } catch (err) {
    console.error(`${stamp()} launcher: boot failed: ${(err as Error).message}`);
    reportStartup({ type: 'error', message: (err as Error).message });
    process.exitCode = 1;
    return;
  }
  // The measured program runs in this process, as firmware hands over to the kernel it measured: one Node.js start
  // per boot instead of two (on two cores shared by every node, start-up is what a boot costs). This process runs
  // on the measured Node.js binary: the provider starts it with image.nodeBinary.
  Object.assign(process.env, nodeProgramEnv(config));
  process.chdir(config.nodeDir);
  console.log(`${stamp()} launcher: starting ${config.image.entry} (pid ${process.pid})`);
  reportStartup({ type: 'ready', programPid: process.pid });
  try {
    // A CommonJS entry (the bundle's main.cjs) is required: import() of CommonJS first scans its source for export
    // names with Node.js's CommonJS lexer (about 6 ms of a node's start here).
    const { entry } = config.image;
    const program = (
      entry.endsWith('.cjs') ? createRequire(import.meta.url)(entry) : await import(pathToFileURL(entry).href)
    ) as { main?: () => Promise<void> };
    if (typeof program.main === 'function') await program.main();
  } catch (err) {
    console.error(`${stamp()} launcher: the node program failed to start: ${(err as Error).message}`);
    process.exit(1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void runLauncher(process.argv[2] ?? '');
