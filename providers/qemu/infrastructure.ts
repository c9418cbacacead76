/**
 * The qemu provider's CLI side: the local provider's cluster (record, network, cloud daemon with metadata server,
 * load balancer and here also DHCP, process ownership, scaling, power, terminate: providers/local/infrastructure.ts)
 * whose nodes are QEMU VMs instead of processes. It overrides what differs:
 *
 *   startTpm       the AK is read once before the first boot (a short-lived swtpm on its server socket, as for a
 *                  local node), registered with the metadata server, then the node's swtpm runs for QEMU (control
 *                  socket only; QEMU resets the TPM at every VM reset and the firmware starts it)
 *   plug           the node's namespace holds a bridge and a tap device instead of an address (../local/network.ts)
 *   startMachine   QEMU in the node's namespace (./vm.ts), booting the node image under OVMF; a reboot of a
 *                  running VM is a real reset over QMP (system_reset); its PID is recorded as the node's launcher
 *
 * The image comes from the config (`image`: a folder or a version of the user's qemu image store, ./image.ts); a
 * node keeps the image it was made with, so an upgrade's new nodes boot the new one.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { userConfigDir as defaultUserConfigDir } from '../../lib/user-config-dir.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { CreateRequest, CreateResult, ProviderContext } from '../contract.js';
import type { ClusterFile } from '../local/cluster-file.js';
import { LocalInfrastructure } from '../local/infrastructure.js';
import { nodePaths, type NodePaths } from '../local/layout.js';
import { requireRoot, type ClusterNetwork } from '../local/network.js';
import { findProgram } from '../local/preconditions.js';
import { isOwnedBy, stopOwnedProcesses } from '../local/processes.js';
import { chooseAccel, type AccelChoice } from './accel.js';
import { resolveQemuImage, type QemuImage } from './image.js';
import { qmpCommand } from './qmp.js';
import { prepareVmFiles, qemuArgs, startVm, TAP_DEVICE, vmPaths, type VmSettings } from './vm.js';

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
  swtpm_setup: 'swtpm-tools',
  ip: 'iproute2',
  nsenter: 'util-linux',
};

export class QemuInfrastructure extends LocalInfrastructure {
  override readonly name: string = 'qemu';
  private readonly settings: Omit<VmSettings, 'accel'> & { accel: 'auto' | 'kvm' | 'tcg' };
  private readonly userConfig: string;
  private readonly accelChoices = new Map<string, Promise<AccelChoice>>();

  constructor(options: QemuInfrastructureOptions = {}) {
    super({ image: options.image ?? '', userConfigDir: options.userConfigDir, addressPool: options.addressPool, metadataPort: options.metadataPort, random: options.random });
    this.network.dhcp = true;
    this.userConfig = options.userConfigDir ?? defaultUserConfigDir();
    this.settings = {
      vcpus: options.vcpus ?? 2,
      memoryMiB: options.memoryMiB ?? 2048,
      firmware: options.firmware ?? '/usr/share/OVMF/OVMF_CODE_4M.fd',
      firmwareVars: options.firmwareVars ?? '/usr/share/OVMF/OVMF_VARS_4M.fd',
      accel: options.accel ?? 'auto',
    };
  }

  /** Root, QEMU, qemu-img, swtpm, ip, nsenter and the firmware files, each missing one named with its fix. */
  override async checkPreconditions(): Promise<void> {
    requireRoot();
    const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
    const missing: string[] = [];
    for (const program of Object.keys(QEMU_PROGRAMS)) if (!(await findProgram(program, dirs))) missing.push(program);
    const firmware = [];
    for (const file of [this.settings.firmware, this.settings.firmwareVars]) if (!(await fs.stat(file).catch(() => undefined))) firmware.push(file);
    if (missing.length === 0 && firmware.length === 0) return;
    throw new UserError(
      `The qemu provider cannot start here; nothing was started or written: ${[
        ...(missing.length ? [`${missing.join(', ')} not installed`] : []),
        ...(firmware.length ? [`no firmware at ${firmware.join(', ')}`] : []),
      ].join('; ')}.`,
      { hint: `Run \`npm run setup\` (it installs ${[...new Set([...missing.map((p) => QEMU_PROGRAMS[p]), ...(firmware.length ? ['ovmf'] : [])])].join(', ')}), or set provider.qemu.firmware and firmwareVars.` },
    );
  }

  override async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    await this.imageOf(this.imageVersion, ctx); // refuses a missing image before anything exists
    return super.create(request, ctx);
  }

  /** The qemu image of a node's `image`; relative folders are the workspace's. */
  imageOf(image: string, ctx: Pick<ProviderContext, 'workspaceDir'>): Promise<QemuImage> {
    return resolveQemuImage(image, { userConfigDir: this.userConfig, baseDir: ctx.workspaceDir });
  }

  /** The accelerator of the image (the config's, or a remembered or fresh probe: ./accel.ts), once per image. */
  async accelFor(image: QemuImage): Promise<AccelChoice> {
    let choice = this.accelChoices.get(image.rawDisk);
    if (!choice) {
      choice = (async () => {
        // The kernel decides whether KVM runs the image: the manifest names its package (and its SHA-256).
        const manifest = JSON.parse(await fs.readFile(path.join(image.dir, 'manifest.json'), 'utf8').catch(() => '{}')) as {
          inputs?: { debianPackages?: { name: string; sha256: string }[] };
        };
        const kernel = manifest.inputs?.debianPackages?.find((p) => p.name.startsWith('linux-image-'));
        return chooseAccel(this.settings.accel, {
          rawDisk: image.rawDisk,
          firmware: this.settings.firmware,
          firmwareVars: this.settings.firmwareVars,
          kernelKey: kernel ? `${kernel.name}@${kernel.sha256}` : image.rawDisk,
          rememberIn: path.join(this.userConfig, 'qemu-accel.json'),
        });
      })();
      this.accelChoices.set(image.rawDisk, choice);
    }
    return choice;
  }

  /** The images are checked where the node boots (startMachine), relative to the workspace. */
  protected override async requireImage(): Promise<void> {}

  protected override async plug(network: ClusterNetwork, name: string, host: number): Promise<void> {
    await network.plugVmNode(name, host, TAP_DEVICE);
  }

  /** The AK once (a short-lived swtpm on its server socket), then the node's swtpm for QEMU (control socket only). */
  protected override async startTpm(file: ClusterFile, name: string, np: NodePaths): Promise<number> {
    const node = file.record.nodes[name];
    const { startSwtpm } = await import('../../lib/tpm/swtpm.js');
    if (node.akPublic === undefined) {
      const swtpm = await startSwtpm({ stateDir: np.tpmDir, socketDir: np.socketDir });
      try {
        const { TpmClient } = await import('../../lib/tpm/client.js');
        const client = await TpmClient.connect(swtpm.serverSocket);
        try {
          const ak = await client.createAttestationKey();
          await client.flushContext(ak.handle);
          const akPublic = Buffer.from(ak.publicArea).toString('base64');
          await file.update(() => {
            node.akPublic = akPublic;
          });
        } finally {
          client.close();
        }
      } finally {
        await swtpm.stop();
      }
    }
    return (await startSwtpm({ stateDir: np.tpmDir, socketDir: np.socketDir, detached: true, attach: 'vm' })).pid;
  }

  protected override async startMachine(file: ClusterFile, name: string, ctx: ProviderContext, options: { reboot?: boolean; plugged?: boolean }): Promise<void> {
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    const paths = vmPaths(np);
    if (node.launcherPid !== undefined && (await isOwnedBy(node.launcherPid, np.dir))) {
      if (options.reboot) {
        ctx.progress?.(`resetting ${name}`);
        await qmpCommand(paths.qmpSocket, 'system_reset');
      }
      return;
    }
    await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0], { keep: [node.swtpmPid as number] });
    const network = this.clusterNetwork(file);
    if (!options.plugged) await this.plug(network, name, node.host);
    const image = await this.imageOf(node.image ?? this.imageVersion, ctx);
    const stateDiskGB = file.record.nodeGroups[node.group]?.stateDiskSizeGB ?? 1;
    await prepareVmFiles(paths, { imageRawDisk: image.rawDisk, stateDiskGB, firmwareVars: this.settings.firmwareVars });
    const choice = await this.accelFor(image);
    await writeFileAtomic(path.join(np.dir, 'accel'), `${choice.accel} (${choice.reason})\n`);
    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    const address = this.address(file.record, name);
    ctx.progress?.(`booting VM ${name} (${choice.accel.toUpperCase()}: ${choice.reason})`);
    const pid = await startVm({
      owner: np.dir,
      netns: network.nodeNetns(name),
      args: qemuArgs(name, address, paths, swtpmPaths(np.tpmDir, np.socketDir).ctrlSocket, { ...this.settings, accel: choice.accel }),
      paths,
    });
    await file.update(() => {
      node.launcherPid = pid;
    });
    await this.recordNode(file, name, ctx);
    await writeFileAtomic(np.launcherPid, `${pid}\n`);
    ctx.log.debug('qemu node started', { name, address, qemuPid: pid, accel: choice.accel, image: image.dir });
  }
}
