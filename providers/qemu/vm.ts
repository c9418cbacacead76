/**
 * One qemu node's virtual machine: its files, the QEMU command line, and starting it detached in the node's network
 * namespace. Per node (its folder, providers/local/layout.ts, plus the runtime folder for sockets):
 *
 *   boot.qcow2       copy-on-write overlay over the image's raw disk (`qemu-img create -f qcow2 -F raw -b`): the
 *                    image itself is never written
 *   state.raw        the state disk, a sparse raw file of the node group's size; the guest formats it with LUKS2 and
 *                    opens it with dm-crypt, so the host only ever holds ciphertext
 *   OVMF_VARS.fd     the node's own copy of the firmware's variable store
 *   node.log         the serial console (appended): firmware, kernel, /init's boot report and the node program's log
 *   qemu.log         QEMU's own messages
 *   <runtime>/<node>/qmp.sock   QEMU's monitor (QMP): startVm takes its first accepted connection as "QEMU runs";
 *                               power control is by process (a reboot starts a new QEMU: ./vm-machine.ts)
 *
 * The command line keeps the boot path that `image measure` predicts (docs/measured-boot.md): q35, -nodefaults (no
 * default CD-ROM whose failed boot option would add events to PCR 4), the image disk as the only boot option
 * (bootindex=1), the network card without option ROM. The TPM is the node's swtpm (tpm-crb over its control socket).
 * The guest gets the host's randomness through a virtio-rng device (from /dev/urandom): the firmware offers it to the
 * boot loader as EFI_RNG_PROTOCOL, the kernel's EFI stub seeds the kernel's random pool from it and Debian's kernel
 * trusts that seed (RANDOM_TRUST_BOOTLOADER), so the pool is ready from the kernel's first line ("random: crng init
 * done" at 0.0 s). Without it the emulated CPU (no RDRAND under TCG) leaves the pool unseeded when Node.js, whose
 * start calls getrandom(), begins (docs/workflows/node-images.md, "Boot time"). A device without option ROM or disk
 * adds no boot option, so PCR 4 is unchanged. Trusting the host's seed adds no trust: this host already runs the VM's
 * TPM (swtpm) and sees its memory; cloud VMs have RDRAND and no such device.
 * The network card is a tap device (tap0) in the node's namespace with the MAC made from the node's address
 * (providers/local/network.ts), so the cloud daemon's DHCP server gives the guest exactly that address.
 * QEMU carries the node folder as its owner mark (providers/local/processes.ts), so stop and terminate find it.
 */
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { canConnect, runProgram } from '../../lib/process.js';
import { openRegularFileForAppend } from '../../lib/workspace/regular-file.js';
import type { NodePaths } from '../local/layout.js';
import { macAddress, netnsPath } from '../local/network.js';
import { OWNER_ENV } from '../local/processes.js';
import { STATE_DISK_SERIAL } from './node-platform.js';

export const TAP_DEVICE = 'tap0';

export interface VmPaths {
  bootDisk: string;
  stateDisk: string;
  firmwareVars: string;
  qmpSocket: string;
  qemuLog: string;
  serialLog: string;
}

export function vmPaths(np: NodePaths): VmPaths {
  return {
    bootDisk: path.join(np.dir, 'boot.qcow2'),
    stateDisk: path.join(np.dir, 'state.raw'),
    firmwareVars: path.join(np.dir, 'OVMF_VARS.fd'),
    qmpSocket: path.join(np.socketDir, 'qmp.sock'),
    qemuLog: path.join(np.dir, 'qemu.log'),
    serialLog: np.log,
  };
}

export interface VmSettings {
  vcpus: number;
  memoryMiB: number;
  firmware: string;
  firmwareVars: string;
  accel: 'kvm' | 'tcg';
}

const exists = (file: string) =>
  fs.access(file, constants.F_OK).then(
    () => true,
    () => false,
  );

/** Makes the node's disks and firmware variables where they are missing (a node keeps them across reboots). */
export async function prepareVmFiles(
  paths: VmPaths,
  options: { imageRawDisk: string; stateDiskGB: number; firmwareVars: string },
): Promise<void> {
  if (!(await exists(paths.bootDisk))) {
    const temp = `${paths.bootDisk}.tmp`;
    const res = await runProgram('qemu-img', [
      'create',
      '-q',
      '-f',
      'qcow2',
      '-F',
      'raw',
      '-b',
      path.resolve(options.imageRawDisk),
      temp,
    ]);
    if (res.code !== 0) {
      throw new UserError(
        `qemu-img could not make the node's disk over ${options.imageRawDisk}: ${res.output.trim()}`,
        {
          hint:
            res.code === -1
              ? 'Install qemu-utils (npm run setup installs it).'
              : 'Check that the image file exists and is readable.',
        },
      );
    }
    await fs.rename(temp, paths.bootDisk);
  }
  if (!(await exists(paths.stateDisk))) {
    const temp = `${paths.stateDisk}.tmp`;
    const handle = await fs.open(temp, 'w', 0o600);
    try {
      await handle.truncate(options.stateDiskGB * 1024 ** 3); // sparse: takes no space until the guest writes
    } finally {
      await handle.close();
    }
    await fs.rename(temp, paths.stateDisk);
  }
  if (!(await exists(paths.firmwareVars))) {
    await fs.copyFile(options.firmwareVars, `${paths.firmwareVars}.tmp`).catch((err: NodeJS.ErrnoException) => {
      throw new UserError(`The firmware variable store ${options.firmwareVars} cannot be copied: ${err.message}`, {
        hint: 'Install ovmf (npm run setup installs it), or set provider.qemu.firmwareVars.',
      });
    });
    await fs.rename(`${paths.firmwareVars}.tmp`, paths.firmwareVars);
  }
}

/** The QEMU command line of a node (see the module header). */
export function qemuArgs(
  name: string,
  address: string,
  paths: VmPaths,
  tpmCtrlSocket: string,
  settings: VmSettings,
): string[] {
  return [
    '-name',
    name,
    '-machine',
    'q35',
    '-accel',
    settings.accel,
    '-m',
    String(settings.memoryMiB),
    '-smp',
    String(settings.vcpus),
    '-nodefaults',
    '-no-user-config',
    '-display',
    'none',
    '-chardev',
    `file,id=serial0,path=${paths.serialLog},append=on`,
    '-serial',
    'chardev:serial0',
    '-drive',
    `if=pflash,format=raw,unit=0,readonly=on,file=${settings.firmware}`,
    '-drive',
    `if=pflash,format=raw,unit=1,file=${paths.firmwareVars}`,
    '-drive',
    `if=none,id=boot,format=qcow2,file=${paths.bootDisk}`,
    '-device',
    'virtio-blk-pci,drive=boot,bootindex=1',
    '-drive',
    `if=none,id=state,format=raw,file=${paths.stateDisk}`,
    '-device',
    `virtio-blk-pci,drive=state,serial=${STATE_DISK_SERIAL}`,
    '-chardev',
    `socket,id=tpmchr,path=${tpmCtrlSocket}`,
    '-tpmdev',
    'emulator,id=tpm0,chardev=tpmchr',
    '-device',
    'tpm-crb,tpmdev=tpm0',
    '-object',
    'rng-random,id=rng0,filename=/dev/urandom',
    '-device',
    'virtio-rng-pci,rng=rng0',
    '-netdev',
    `tap,id=net0,ifname=${TAP_DEVICE},script=no,downscript=no`,
    '-device',
    `virtio-net-pci,netdev=net0,mac=${macAddress(address)},romfile=`,
    '-qmp',
    `unix:${paths.qmpSocket},server=on,wait=off`,
  ];
}

/**
 * Starts QEMU detached (its own session, so it outlives the CLI) in the node's namespace, owned by the node folder,
 * and resolves with its PID once its QMP socket accepts; a QEMU that exits first is a UserError with its messages.
 */
export async function startVm(options: {
  owner: string;
  netns: string;
  args: string[];
  paths: VmPaths;
  timeoutMs?: number;
}): Promise<number> {
  const { paths } = options;
  await fs.rm(paths.qmpSocket, { force: true });
  await fs.mkdir(path.dirname(paths.qmpSocket), { recursive: true, mode: 0o700 });
  const log = await openRegularFileForAppend(paths.qemuLog, { what: "QEMU's log", mode: 0o600 });
  let pid: number | undefined;
  let exit: string | undefined;
  try {
    const child = spawn('nsenter', [`--net=${netnsPath(options.netns)}`, '--', 'qemu-system-x86_64', ...options.args], {
      cwd: options.owner,
      detached: true,
      env: { ...process.env, [OWNER_ENV]: options.owner },
      stdio: ['ignore', log.fd, log.fd],
    });
    child.once('exit', (code, signal) => (exit = signal ?? `code ${code}`));
    child.once('error', (err) => (exit = err.message));
    child.unref();
    pid = child.pid;
  } finally {
    await log.close();
  }
  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  for (;;) {
    if (exit !== undefined || pid === undefined) {
      const messages = (await fs.readFile(paths.qemuLog, 'utf8').catch(() => ''))
        .trim()
        .split('\n')
        .slice(-5)
        .join(' | ');
      throw new UserError(`QEMU exited (${exit ?? 'not started'}) before the VM ran: ${messages}`, {
        hint: "Install qemu-system-x86 and ovmf (npm run setup installs them); the node's qemu.log has QEMU's messages.",
      });
    }
    if (await canConnect(paths.qmpSocket)) return pid;
    if (Date.now() > deadline)
      throw new UserError(`QEMU did not open its QMP socket ${paths.qmpSocket} in time.`, {
        hint: `See ${paths.qemuLog}.`,
      });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
