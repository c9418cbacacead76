/**
 * The local provider's InfrastructureProvider (docs/workflows/local-provider.md): a cluster on this machine
 * (./cluster.ts) whose nodes are processes (./process-machine.ts: swtpm and a launcher that measures the image and
 * runs the node program in the node's network namespace). Loaded lazily by providers/local/index.ts.
 */
import type { Measurements } from '../../lib/attestation/types.js';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { LocalCluster } from './cluster.js';
import type { NodeImage } from './image-pcrs.js';
import { METADATA_PORT } from './layout.js';
import { ADDRESS_POOL_ENV, DEFAULT_ADDRESS_POOL } from './network.js';
import { defaultNodeProgram } from './node-program.js';
import { requireLocalPreconditions } from './preconditions.js';
import { ProcessMachine } from './process-machine.js';
export { defaultNodeProgram } from './node-program.js';

export interface LocalInfrastructureOptions {
  /**
   * The config's `image`: `local` (default) boots the current build (or `nodeProgram`), a version boots that image of
   * the user's (`mini image create`, ./image-store.ts). New nodes boot it; a node keeps the image it was made with.
   */
  image?: string;
  /** The user's config folder, which holds the versioned images; default $XDG_CONFIG_HOME/constellation. */
  userConfigDir?: string;
  /** For image `local`: the node program the launcher starts, and the image directory it measures (entry inside it). */
  nodeProgram?: { entry: string; imageDir: string };
  /** The Node.js binary that runs the node program (measured into PCR 4). Default: the one running the CLI. */
  nodeBinary?: string;
  metadataPort?: number;
  /** The pool that cluster address ranges come from. Default: env CONSTELLATION_LOCAL_ADDRESS_POOL, else 10.213.0.0/16. */
  addressPool?: string;
  /** Randomness for choosing the first address range to try (tests). */
  random?: () => number;
}

export class LocalInfrastructure extends LocalCluster {
  readonly name = 'local';
  private readonly processes: ProcessMachine;

  constructor(options: LocalInfrastructureOptions = {}) {
    const processes = new ProcessMachine({
      nodeProgram: options.nodeProgram ?? defaultNodeProgram(),
      nodeBinary: options.nodeBinary ?? process.execPath,
      userConfigDir: options.userConfigDir,
    });
    super(
      {
        image: options.image ?? LOCAL_BUILD_IMAGE,
        metadataPort: options.metadataPort ?? METADATA_PORT,
        network: {
          addressPool: options.addressPool ?? (process.env[ADDRESS_POOL_ENV] || DEFAULT_ADDRESS_POOL),
          random: options.random,
        },
      },
      processes,
    );
    this.processes = processes;
  }

  /** What the launcher runs and measures for the image new nodes boot. */
  get image(): NodeImage {
    return this.processes.nodeImage(this.imageVersion);
  }

  /**
   * The measurements (PCR 4, 8, 9, 11, 12, 13, SHA-256) of a node booted from this provider's image, as its files
   * are at this moment. For a versioned image, `create` uses its signed measurements instead (cli/images).
   */
  expectedMeasurements(): Promise<Measurements> {
    return this.processes.expectedMeasurements(this.imageVersion);
  }

  /** Root, the programs, /dev/fuse, the runtime folder and the current build's node program (./preconditions.ts). */
  async checkPreconditions(): Promise<void> {
    await requireLocalPreconditions({ nodeProgram: this.processes.localBuild.entry });
  }
}
