/**
 * The machine of a local process node (docs/workflows/local-provider.md): its swtpm runs in the root namespace with
 * its server and control sockets in the cluster's runtime folder, and a detached launcher (./launcher.ts) runs in the
 * node's network namespace, measures the node image into the TPM and runs the node program on the Node.js binary
 * that it measured into PCR 4. A reboot starts the launcher again, which resets the TPM first.
 *
 * The image is the config's `image`: `local` is the current build (or the `nodeProgram` given), a version is that
 * image of the user's (`mini image create`, ./image-store.ts). A node keeps the image it was made with.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Measurements } from '../../lib/attestation/types.js';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { UserError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { ProviderContext } from '../contract.js';
import { metadataUrl } from './cloud.js';
import { FileDigestCache } from './digest-cache.js';
import { expectedImageMeasurements, type NodeImage } from './image-pcrs.js';
import { LocalImageStore } from './image-store.js';
import type { LaunchConfig } from './launcher.js';
import type { NodePaths } from './layout.js';
import type { ClusterNetwork } from './network.js';
import type { MachineNode, NodeMachine } from './node-lifecycle.js';
import { BACKGROUND_NICE, detachedProgram, spawnDetached } from './processes.js';

export interface ProcessMachineOptions {
  /** For image `local`: the node program the launcher starts, and the image directory it measures (entry inside it). */
  nodeProgram: { entry: string; imageDir: string };
  /** The Node.js binary that runs the node program (measured into PCR 4). */
  nodeBinary: string;
  /** The user's config folder, which holds the versioned images; default $XDG_CONFIG_HOME/constellation. */
  userConfigDir?: string;
}

export class ProcessMachine implements NodeMachine {
  /** The current build (image `local`). */
  readonly localBuild: NodeImage;
  private readonly images: LocalImageStore;
  /** The user's digest cache of image files, shared by the CLI and every launcher of every cluster (./digest-cache.ts). */
  private readonly digestCacheFile: string;

  constructor(options: ProcessMachineOptions) {
    const nodeBinary = path.resolve(options.nodeBinary);
    this.localBuild = {
      nodeBinary,
      imageDir: path.resolve(options.nodeProgram.imageDir),
      entry: path.resolve(options.nodeProgram.entry),
    };
    this.images = new LocalImageStore({ userConfigDir: options.userConfigDir, nodeBinary });
    this.digestCacheFile = this.images.digestCacheFile;
  }

  /** What the launcher runs and measures for image `version`. */
  nodeImage(version: string): NodeImage {
    return version === LOCAL_BUILD_IMAGE ? this.localBuild : this.images.nodeImage(version);
  }

  /**
   * The measurements (PCR 4, 8, 9, 11, 12, 13, SHA-256) of a node booted from image `version`, as its files are at
   * this moment (files unchanged since an earlier run are not hashed again: the user's digest cache).
   */
  expectedMeasurements(version: string): Promise<Measurements> {
    return expectedImageMeasurements(
      this.nodeImage(version),
      new FileDigestCache(this.digestCacheFile, { waitToRest: true }),
    );
  }

  /** Refuses to boot an image that is not there (no build, or no such versioned image). */
  async requireImage(version: string): Promise<void> {
    const image = this.nodeImage(version);
    if (version !== LOCAL_BUILD_IMAGE && !(await this.images.has(version))) {
      throw new UserError(`There is no local image ${version} (in ${this.images.imagesDir}).`, {
        hint: `\`constellation mini image list\` shows the images; \`constellation mini image create ${version}\` makes one from the current build.`,
      });
    }
    await fs.access(image.entry).catch(() => {
      throw new UserError(`The node program ${image.entry} does not exist.`, {
        hint:
          version === LOCAL_BUILD_IMAGE
            ? 'Build the project first (npm run build).'
            : `The image ${version} is incomplete: make it again under a new version.`,
      });
    });
  }

  /** The node's swtpm, detached; the launcher talks to it on its server socket and resets it through the control socket. */
  async startTpm(np: NodePaths, options: { readAk: boolean }): Promise<{ pid: number; akPublic?: string }> {
    const { readAttestationKey, startSwtpm } = await import('../../lib/tpm/swtpm.js');
    const swtpm = await startSwtpm({ stateDir: np.tpmDir, socketDir: np.socketDir, detached: true });
    if (!options.readAk) return { pid: swtpm.pid };
    try {
      return { pid: swtpm.pid, akPublic: Buffer.from(await readAttestationKey(swtpm.serverSocket)).toString('base64') };
    } catch (err) {
      await swtpm.stop();
      throw err;
    }
  }

  /** The node's namespace, with its address. */
  async plug(network: ClusterNetwork, target: Pick<MachineNode, 'name' | 'node' | 'address'>): Promise<void> {
    await network.plugNode(target.name, target.node.host, target.address);
  }

  /** The nodes' namespaces, with their addresses, made together. */
  async plugAll(network: ClusterNetwork, targets: Pick<MachineNode, 'name' | 'node' | 'address'>[]): Promise<void> {
    await network.plugNodes(targets.map((t) => ({ node: t.name, host: t.node.host, address: t.address })));
  }

  /** The launcher, which measures the image and runs the node program; it reports whether the node program started. */
  async start(target: MachineNode, ctx: ProviderContext): Promise<{ pid: number; failure?: Error }> {
    const { name, node, paths: np, address, cluster } = target;
    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    const tpm = swtpmPaths(np.tpmDir, np.socketDir);
    const imageVersion = node.image ?? LOCAL_BUILD_IMAGE;
    await this.requireImage(imageVersion);
    const launch: LaunchConfig = {
      name,
      role: node.role,
      address,
      metadataUrl: metadataUrl(cluster.prefix as string, cluster.metadataPort),
      nodeDir: np.dir,
      stateDisk: np.stateDisk,
      stateDir: np.stateDir,
      tpm: { serverSocket: tpm.serverSocket, ctrlSocket: tpm.ctrlSocket },
      image: this.nodeImage(imageVersion),
      kubernetesBackend: cluster.kubernetesBackend,
      imageVersion,
      digestCache: this.digestCacheFile,
    };
    await writeFileAtomic(np.launchConfig, `${JSON.stringify(launch, null, 2)}\n`);
    ctx.progress?.(`booting ${name}`);
    const { pid, message } = await spawnDetached({
      file: detachedProgram('launcher'),
      // The launcher runs the node program in its own process: on the Node.js binary that is measured into PCR 4.
      execPath: launch.image.nodeBinary,
      args: [np.launchConfig],
      owner: np.dir,
      cwd: np.dir,
      logFile: np.log,
      netns: target.netns,
      ...(target.background ? { sessionNice: BACKGROUND_NICE } : {}),
      ...(target.started ? { spawned: target.started } : {}),
    });
    if (message.type === 'error') {
      return {
        pid,
        failure: new UserError(`Local node ${name} did not boot: ${message.message}`, {
          hint: `See its log: ${np.log}`,
        }),
      };
    }
    ctx.log.debug('local node booted', { name, address, launcherPid: pid, programPid: message.programPid });
    return { pid };
  }
}
