/**
 * The machine of a qemu node (docs/workflows/mini.md#vm-nodes-mini-up---vm): a QEMU VM in the node's network
 * namespace (./vm.ts), booting the node image under OVMF from a copy-on-write overlay, with a state disk and swtpm as
 * its TPM. The lifecycle around it (providers/local/node-lifecycle.ts) is the local provider's.
 *
 *   startTpm   the AK is read once before the first boot (a short-lived swtpm on its server socket, as for a local
 *              node) so it can be registered with the metadata server; then the node's swtpm runs for QEMU (control
 *              socket only; QEMU initializes the TPM when it starts and the firmware starts it up). The TPM has the
 *              SHA-256 PCR bank only (VM_PCR_BANKS): the firmware and the boot stages hash every measured byte once
 *              per active bank (under TCG SHA-256 hashes about 13 MB per CPU second), and nothing reads a qemu
 *              node's SHA-384 bank (its quotes, `image measure`, the boot report and the measurements are SHA-256;
 *              docs/workflows/node-images.md#boot-time)
 *   plug       the node's namespace holds a bridge and a tap device instead of an address (../local/network.ts)
 *   start      QEMU, with the accelerator chosen once per image (./accel.ts); its PID is the node's launcherPid
 *
 * A reboot (`mini reboot`) is a power cycle: QEMU exits and shuts its swtpm down with it (tpmStopsWithMachine), then
 * a new swtpm on the same state and a new QEMU on the same disks and firmware variables start. The TPM sees what any
 * reset shows it: its seeds and NV (so the AK) stay, the PCRs start from zero, and the firmware measures the image
 * again. It is not a reset inside the running QEMU (QMP system_reset) because under TCG the firmware after such a
 * reset has run up to ten times slower than in a new QEMU process (minutes instead of seconds to reach the boot
 * loader, in a guest that had run for a while; not every time, and the cause was not found).
 *
 * The image comes from the config (`image`: a folder or a version of the user's qemu image store, ./image.ts); a
 * node keeps the image it was made with, so an upgrade's new nodes boot the new one.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import type { ProviderContext } from '../contract.js';
import type { NodePaths } from '../local/layout.js';
import type { ClusterNetwork } from '../local/network.js';
import type { MachineNode, NodeMachine } from '../local/node-lifecycle.js';
import { chooseAccel, type AccelChoice } from './accel.js';
import { resolveQemuImage, type QemuImage } from './image.js';
import { prepareVmFiles, qemuArgs, startVm, TAP_DEVICE, vmPaths, type VmSettings } from './vm.js';

/** The PCR banks of a qemu node's TPM (see the module header). */
export const VM_PCR_BANKS: readonly string[] = ['sha256'];

export type VmMachineSettings = Omit<VmSettings, 'accel'> & { accel: 'auto' | 'kvm' | 'tcg' };

export class VmMachine implements NodeMachine {
  readonly tpmStopsWithMachine = true;
  private readonly accelChoices = new Map<string, Promise<AccelChoice>>();

  constructor(
    readonly settings: VmMachineSettings,
    /** The config's image: what a node boots whose record names none. */
    private readonly defaultImage: string,
    /** The user's config folder: its qemu image store and the remembered accelerator choices. */
    private readonly userConfigDir: string,
  ) {}

  /** The qemu image of a node's `image`; relative folders are the workspace's. */
  imageOf(image: string, ctx: Pick<ProviderContext, 'workspaceDir'>): Promise<QemuImage> {
    return resolveQemuImage(image, { userConfigDir: this.userConfigDir, baseDir: ctx.workspaceDir });
  }

  async requireImage(image: string, ctx: Pick<ProviderContext, 'workspaceDir'>): Promise<void> {
    await this.imageOf(image, ctx);
  }

  /** The accelerator of the image (the config's, or a remembered or fresh probe: ./accel.ts), once per image. */
  accelFor(image: QemuImage): Promise<AccelChoice> {
    let choice = this.accelChoices.get(image.rawDisk);
    if (!choice) {
      choice = (async () => {
        // The kernel decides whether KVM runs the image: the manifest names its package (and its SHA-256).
        const manifest = JSON.parse(
          await fs.readFile(path.join(image.dir, 'manifest.json'), 'utf8').catch(() => '{}'),
        ) as {
          inputs?: { debianPackages?: { name: string; sha256: string }[] };
        };
        const kernel = manifest.inputs?.debianPackages?.find((p) => p.name.startsWith('linux-image-'));
        return chooseAccel(this.settings.accel, {
          rawDisk: image.rawDisk,
          firmware: this.settings.firmware,
          firmwareVars: this.settings.firmwareVars,
          kernelKey: kernel ? `${kernel.name}@${kernel.sha256}` : image.rawDisk,
          rememberIn: path.join(this.userConfigDir, 'qemu-accel.json'),
        });
      })();
      this.accelChoices.set(image.rawDisk, choice);
    }
    return choice;
  }

  /** The AK once (a short-lived swtpm on its server socket), then the node's swtpm for QEMU (control socket only). */
  async startTpm(np: NodePaths, options: { readAk: boolean }): Promise<{ pid: number; akPublic?: string }> {
    const { readAttestationKey, startSwtpm } = await import('../../lib/tpm/swtpm.js');
    let akPublic: string | undefined;
    if (options.readAk) {
      const swtpm = await startSwtpm({ stateDir: np.tpmDir, socketDir: np.socketDir, pcrBanks: VM_PCR_BANKS });
      try {
        akPublic = Buffer.from(await readAttestationKey(swtpm.serverSocket)).toString('base64');
      } finally {
        await swtpm.stop();
      }
    }
    const { pid } = await startSwtpm({
      stateDir: np.tpmDir,
      socketDir: np.socketDir,
      pcrBanks: VM_PCR_BANKS,
      detached: true,
      attach: 'vm',
    });
    return { pid, akPublic };
  }

  async plug(network: ClusterNetwork, target: Pick<MachineNode, 'name' | 'node'>): Promise<void> {
    await network.plugVmNode(target.name, target.node.host, TAP_DEVICE);
  }

  async start(target: MachineNode, ctx: ProviderContext): Promise<{ pid: number }> {
    const { name, node, paths: np, address, cluster } = target;
    const paths = vmPaths(np);
    const image = await this.imageOf(node.image ?? this.defaultImage, ctx);
    const stateDiskGB = cluster.nodeGroups[node.group]?.stateDiskSizeGB ?? 1;
    await prepareVmFiles(paths, { imageRawDisk: image.rawDisk, stateDiskGB, firmwareVars: this.settings.firmwareVars });
    const choice = await this.accelFor(image);
    await writeFileAtomic(path.join(np.dir, 'accel'), `${choice.accel} (${choice.reason})\n`);
    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    ctx.progress?.(`booting VM ${name} (${choice.accel.toUpperCase()}: ${choice.reason})`);
    const pid = await startVm({
      owner: np.dir,
      netns: target.netns,
      args: qemuArgs(name, address, paths, swtpmPaths(np.tpmDir, np.socketDir).ctrlSocket, {
        ...this.settings,
        accel: choice.accel,
      }),
      paths,
    });
    ctx.log.debug('qemu node started', { name, address, qemuPid: pid, accel: choice.accel, image: image.dir });
    target.started?.();
    return { pid };
  }
}
