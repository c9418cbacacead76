/**
 * The qemu provider's InfrastructureProvider (docs/workflows/mini.md#vm-nodes-mini-up---vm): the local provider's
 * cluster (cluster file, network, cloud daemon with metadata server, load balancer and here also DHCP, process
 * ownership, scaling, power, terminate: providers/local/cluster.ts) whose nodes are QEMU VMs (./vm-machine.ts)
 * instead of processes.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { QEMU_DEFAULTS } from '../../lib/config/defaults.js';
import { UserError } from '../../lib/errors.js';
import { userConfigDir as defaultUserConfigDir } from '../../lib/user-config-dir.js';
import { LocalCluster } from '../local/cluster.js';
import { METADATA_PORT } from '../local/layout.js';
import { ADDRESS_POOL_ENV, DEFAULT_ADDRESS_POOL, requireRoot } from '../local/network.js';
import { findProgram } from '../local/preconditions.js';
import { VmMachine } from './vm-machine.js';

export interface QemuInfrastructureOptions {
  /** The config's `image`: a built qemu image's folder or a version of the user's qemu image store. */
  image?: string;
  vcpus?: number;
  memoryMiB?: number;
  firmware?: string;
  firmwareVars?: string;
  accel?: 'auto' | 'kvm' | 'tcg';
  userConfigDir?: string;
  addressPool?: string;
  metadataPort?: number;
  random?: () => number;
}

/** Program → the Debian package that has it. */
const QEMU_PROGRAMS: Record<string, string> = {
  'qemu-system-x86_64': 'qemu-system-x86',
  'qemu-img': 'qemu-utils',
  swtpm: 'swtpm',
  ip: 'iproute2',
  nsenter: 'util-linux',
};

export class QemuInfrastructure extends LocalCluster {
  readonly name = 'qemu';
  private readonly vms: VmMachine;

  constructor(options: QemuInfrastructureOptions = {}) {
    const vms = new VmMachine(
      {
        vcpus: options.vcpus ?? 2,
        memoryMiB: options.memoryMiB ?? 2048,
        firmware: options.firmware ?? QEMU_DEFAULTS.firmware,
        firmwareVars: options.firmwareVars ?? QEMU_DEFAULTS.firmwareVars,
        accel: options.accel ?? 'auto',
      },
      options.image ?? '',
      options.userConfigDir ?? defaultUserConfigDir(),
    );
    super(
      {
        image: options.image ?? '',
        metadataPort: options.metadataPort ?? METADATA_PORT,
        network: {
          addressPool: options.addressPool ?? (process.env[ADDRESS_POOL_ENV] || DEFAULT_ADDRESS_POOL),
          random: options.random,
          dhcp: true,
        },
      },
      vms,
    );
    this.vms = vms;
  }

  /** Root, QEMU, qemu-img, swtpm, ip, nsenter and the firmware files, each missing one named with its fix. */
  async checkPreconditions(): Promise<void> {
    requireRoot();
    const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
    const missing: string[] = [];
    for (const program of Object.keys(QEMU_PROGRAMS)) if (!(await findProgram(program, dirs))) missing.push(program);
    const firmware = [];
    for (const file of [this.vms.settings.firmware, this.vms.settings.firmwareVars])
      if (!(await fs.stat(file).catch(() => undefined))) firmware.push(file);
    if (missing.length === 0 && firmware.length === 0) return;
    throw new UserError(
      `The qemu provider cannot start here; nothing was started or written: ${[
        ...(missing.length ? [`${missing.join(', ')} not installed`] : []),
        ...(firmware.length ? [`no firmware at ${firmware.join(', ')}`] : []),
      ].join('; ')}.`,
      {
        hint: `Run \`npm run setup\` (it installs ${[...new Set([...missing.map((p) => QEMU_PROGRAMS[p]), ...(firmware.length ? ['ovmf'] : [])])].join(', ')}), or set provider.qemu.firmware and firmwareVars.`,
      },
    );
  }
}
