/**
 * The qemu provider's node platform: the node program inside a QEMU VM that booted the node image (the same program
 * as on a cloud VM). What it finds where:
 *
 *   TPM          the kernel's TPM device (tpm_crb, backed by the node's swtpm on the host): /dev/tpmrm0, else /dev/tpm0
 *   address      the one the image's /init got by DHCP from the cluster's cloud daemon (providers/common/dhcp-server.ts)
 *   metadata     the cluster's metadata server, on the DHCP router at the metadata port (providers/local/node-metadata.ts:
 *                it knows the node by its source address, exactly as for a process node)
 *   state disk   the virtio disk whose serial is `constellation-state` (/dev/vdb), LUKS2 via cryptsetup, real
 *                dm-crypt in the guest kernel, mounted at /var/run/state
 *   backend      `constellation.kubernetes-backend=` of the kernel command line (measured into PCR 9/11)
 *   version      IMAGE_VERSION of the initrd's /etc/os-release (what `status` shows)
 *
 * It attests as qemu-vtpm with the AK the provider registered when it created the VM; its join service asks the
 * metadata server's AK registry, as a local node's does.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import { VARIANT, qemuInstanceInfo } from '../../lib/attestation/variants/qemu-vtpm.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { UserError } from '../../lib/errors.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { cloudPlatformBase } from '../common/node-platform.js';
import { METADATA_PORT } from '../local/layout.js';
import { LocalNodeMetadata, localAkRegistry } from '../local/node-metadata.js';

/** The serial QEMU gives the state disk (providers/qemu/vm.ts): how the guest tells it from the boot disk. */
export const STATE_DISK_SERIAL = 'constellation-state';

/** Where the guest learns things; tests point these at files of their own. */
export interface GuestFiles {
  cmdline: string;
  /** The image's os-release (its IMAGE_VERSION), in the measured initrd. */
  osRelease?: string;
  routes: string;
  blockDevices: string;
  devices: string;
}

const GUEST_FILES: GuestFiles = {
  cmdline: '/proc/cmdline',
  osRelease: '/etc/os-release',
  routes: '/proc/net/route',
  blockDevices: '/sys/block',
  devices: '/dev',
};

/** The default route's gateway of /proc/net/route (hex little-endian), or undefined. */
export function defaultGateway(routes: string): string | undefined {
  for (const line of routes.split('\n').slice(1)) {
    const [, destination, gateway] = line.trim().split(/\s+/);
    if (destination === '00000000' && gateway && /^[0-9A-Fa-f]{8}$/.test(gateway)) {
      const value = Number.parseInt(gateway, 16);
      return [0, 8, 16, 24].map((shift) => (value >>> shift) & 255).join('.');
    }
  }
  return undefined;
}

/** The guest's own IPv4 address (the DHCP lease's): the first non-loopback one. */
export function guestAddress(interfaces = os.networkInterfaces()): string | undefined {
  for (const list of Object.values(interfaces))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

/** The block device whose serial (virtio's) is the state disk's; /dev/vdb when none carries it. */
export async function findStateDisk(files: GuestFiles = GUEST_FILES): Promise<string> {
  for (const name of await fs.readdir(files.blockDevices).catch(() => [] as string[])) {
    const serial = await fs.readFile(`${files.blockDevices}/${name}/serial`, 'utf8').catch(() => '');
    if (serial.trim() === STATE_DISK_SERIAL) return `${files.devices}/${name}`;
  }
  return `${files.devices}/vdb`;
}

/** IMAGE_VERSION of an os-release file, or undefined. */
export function imageVersionOf(osRelease: string): string | undefined {
  return /^IMAGE_VERSION="?([^"\n]+)"?$/m.exec(osRelease)?.[1];
}

function backendOf(cmdline: string): 'none' | 'kubeadm' {
  return /(?:^|\s)constellation\.kubernetes-backend=kubeadm(?:\s|$)/.test(cmdline) ? 'kubeadm' : 'none';
}

async function tpmDevice(files: GuestFiles): Promise<string> {
  for (const name of ['tpmrm0', 'tpm0']) {
    const device = `${files.devices}/${name}`;
    if ((await fs.stat(device).catch(() => undefined))?.isCharacterDevice()) return device;
  }
  return `${files.devices}/tpmrm0`;
}

export async function qemuNodePlatform(
  options: NodePlatformOptions,
  files: GuestFiles = GUEST_FILES,
): Promise<NodePlatform> {
  const provider = options.providerOptions ?? {};
  const ip = (provider.nodeIp as string | undefined) ?? guestAddress();
  const gateway = defaultGateway(await fs.readFile(files.routes, 'utf8').catch(() => ''));
  const metadataUrl =
    (provider.metadataUrl as string | undefined) ?? (gateway ? `http://${gateway}:${METADATA_PORT}` : undefined);
  if (!ip || !metadataUrl) {
    throw new UserError(
      `This VM has ${ip ? 'no default route' : 'no IPv4 address'}: the DHCP lease of its /init did not arrive, so the cluster's metadata server is unknown.`,
      {
        hint: "Look at the top of the node's log (the boot log): `init: no DHCP lease` names the interface. The cloud daemon answers DHCP only for VMs the provider registered.",
      },
    );
  }
  const metadata = new LocalNodeMetadata({ metadataUrl, nodeIp: ip });
  const base = cloudPlatformBase('qemu', options, { metadata, stateDisk: await findStateDisk(files) });
  const cmdline = await fs.readFile(files.cmdline, 'utf8').catch(() => '');
  const osRelease = files.osRelease ? await fs.readFile(files.osRelease, 'utf8').catch(() => '') : '';
  let name: string | undefined;
  return {
    ...base,
    imageVersion: options.imageVersion ?? imageVersionOf(osRelease) ?? base.imageVersion,
    identity: async () => {
      const self = await base.identity();
      name = self.name;
      return self;
    },
    tpmPath: options.paths?.tpm ?? (await tpmDevice(files)),
    kubernetesBackend: backendOf(cmdline),
    issuer: async (tpm) => {
      name ??= (await metadata.self()).name;
      return new VtpmIssuer({ variant: VARIANT, tpm, instanceInfo: qemuInstanceInfo(name) });
    },
    validatorDeps: async () => ({ akRegistry: localAkRegistry(metadataUrl, { localAddress: ip }) }),
  };
}
