/**
 * What a node image boots into: the kernel command line baked into the UKI and the initrd's /init, a busybox shell
 * script of ours. /init mounts proc, sys, dev and securityfs, loads the kernel modules the node needs (built at image
 * build time from the kernel package, ./modules.ts), brings up loopback and the network the command line names
 * (`constellation.net=dhcp`, the default, `none`, or `static:<addr>/<prefix>[,<gateway>]`), prints the boot report
 * to the console and then runs the node program under the pinned Node.js; when that ends, the VM powers off (a
 * node whose program ended has nothing left to do, and init must not exit: the kernel would panic). The boot report is a fixed format that
 * tests and `image` tooling read from the serial console (docs/workflows/node-images.md):
 *
 *     CONSTELLATION-BOOT pcr-sha256 <N> <64 lowercase hex>    N = 0..23, from /sys/class/tpm/tpm0/pcr-sha256/N
 *     CONSTELLATION-BOOT eventlog <base64 chunk>             repeated: /sys/kernel/security/tpm0/binary_bios_measurements
 *     CONSTELLATION-BOOT end
 */
import { NODE_PROGRAM_ENTRY } from './node-program.js';

export type ImageProvider = 'qemu' | 'aws' | 'azure' | 'gcp';
export const IMAGE_PROVIDERS: readonly ImageProvider[] = ['qemu', 'aws', 'azure', 'gcp'];

/** The attestation variant an image of each provider attests as (its measurements file names it). */
export const IMAGE_VARIANTS: Record<ImageProvider, string> = {
  qemu: 'qemu-vtpm',
  aws: 'aws-sev-snp',
  azure: 'azure-sev-snp',
  gcp: 'gcp-sev-snp',
};

/**
 * Modules every node loads (virtio for the VM's disks and network, device-mapper for the state disk, tun, fuse), and
 * the ciphers of the state disk's aes-xts-plain64 that Debian's cloud kernel builds as modules (xts over ecb; aes
 * itself is built in), and authenc, which pairs them with dm-integrity's hmac(sha256) (built in) into the
 * authenticated cipher authenc(hmac(sha256),xts(aes)): the initrd has no module loader for the kernel's on-demand
 * requests, so dm-crypt would find neither and refuse the mapping.
 */
const COMMON_MODULES = [
  'virtio_pci',
  'virtio_blk',
  'virtio_net',
  'dm_mod',
  'dm_crypt',
  'dm_integrity',
  'ecb',
  'xts',
  'authenc',
  'tun',
  'fuse',
];
/** What each cloud's VMs add: their disk and network drivers. */
const PROVIDER_MODULES: Record<ImageProvider, string[]> = {
  qemu: [],
  aws: ['nvme', 'ena'],
  azure: ['hv_vmbus', 'hv_storvsc', 'hv_netvsc'],
  gcp: ['nvme', 'gve', 'virtio_scsi'],
};

export function modulesFor(provider: ImageProvider): string[] {
  return [...COMMON_MODULES, ...PROVIDER_MODULES[provider]];
}

export type KubernetesBackend = 'none' | 'kubeadm';

/** The fixed kernel command line of a provider's image. */
export function kernelCommandLine(provider: ImageProvider, backend: KubernetesBackend, network = 'dhcp'): string {
  return [
    'console=ttyS0',
    'panic=-1',
    `constellation.csp=${provider}`,
    `constellation.attestation-variant=${IMAGE_VARIANTS[provider]}`,
    `constellation.kubernetes-backend=${backend}`,
    `constellation.net=${network}`,
  ].join(' ');
}

export const NODE_BINARY = 'usr/bin/node';
export const NODE_PROGRAM_DIR = 'usr/lib/constellation/node-program';
export const MODULE_LIST = 'etc/constellation/modules';

/**
 * /init. What it does after mounting runs in three branches at once (a VM has 2 vCPUs, and under TCG every step
 * costs; docs/workflows/node-images.md, "Boot time"): the modules load in the background in their list's order
 * (every module after its dependencies); the network, also in the background, starts as soon as a network interface
 * appears (whichever module of the list brings it: virtio_net, ena, hv_netvsc, gve) and waits for its link before
 * DHCP; the boot report, in the foreground, reads only the TPM. The node program starts once all three are done.
 * The report's lines are prefixed by one `sed` each for the PCRs and the event log, not by a shell loop: the shell's
 * `read` takes a pipe one byte per system call, and the event log is about 34 KB of base64.
 */
export function initScript(): string {
  return `#!/bin/sh
# /init of a Constellation node image (lib/node-image/build/init.ts): mount, load modules, network, boot report, node program.
export PATH=/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t securityfs securityfs /sys/kernel/security
mkdir -p /dev/pts /dev/shm /run /tmp /var/lib /root
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
echo 1 > /proc/sys/kernel/printk

(
  while read -r module; do
    [ -n "$module" ] && insmod "/$module" || echo "init: could not load $module"
  done < /${MODULE_LIST}
  : > /run/modules-loaded
) &

# The first network interface besides lo, once one appears; none if none has when every module is loaded.
interface() {
  iface=
  while :; do
    last=
    [ -e /run/modules-loaded ] && last=1
    for dev in /sys/class/net/*; do
      [ "\${dev##*/}" != lo ] && [ -e "$dev" ] && { iface="\${dev##*/}"; return 0; }
    done
    [ -n "$last" ] && return 1
    sleep 0.05
  done
}
# Brings the interface up and waits (up to 5 s) for its link ("unknown": a driver that reports no carrier): a
# DISCOVER sent before the kernel has seen the carrier is dropped, and udhcpc would wait 3 s to send the next.
up() {
  ip link set "$1" up || return 1
  i=0
  while [ $i -lt 50 ]; do
    read -r state < "/sys/class/net/$1/operstate"
    case "$state" in up | unknown) return 0 ;; esac
    sleep 0.1
    i=$((i + 1))
  done
  return 0
}
(
  ip link set lo up
  net=dhcp
  read -r cmdline < /proc/cmdline
  for word in $cmdline; do
    case "$word" in constellation.net=*) net="\${word#constellation.net=}" ;; esac
  done
  case "$net" in
    none) ;;
    dhcp) interface && up "$iface" && udhcpc -i "$iface" -q -n -t 5 -s /etc/constellation/udhcpc.script >/dev/null 2>&1 || echo "init: no DHCP lease on \${iface:-no interface}" ;;
    static:*)
      spec="\${net#static:}"; addr="\${spec%%,*}"; gw="\${spec#*,}"
      interface && up "$iface" && ip addr add "$addr" dev "$iface"
      [ "$gw" != "$spec" ] && ip route add default via "$gw"
      ;;
  esac
) &

pcrs=/sys/class/tpm/tpm0/pcr-sha256
n=0
while [ $n -le 23 ]; do
  [ -r $pcrs/$n ] && read -r value < $pcrs/$n && echo "$n $value"
  n=$((n + 1))
done | sed 'y/ABCDEF/abcdef/; s/^/CONSTELLATION-BOOT pcr-sha256 /'
log=/sys/kernel/security/tpm0/binary_bios_measurements
[ -r $log ] && base64 $log | sed 's/^/CONSTELLATION-BOOT eventlog /'
echo "CONSTELLATION-BOOT end"

wait
echo "init: starting the node program"
/${NODE_BINARY} /${NODE_PROGRAM_DIR}/${NODE_PROGRAM_ENTRY}
echo "init: the node program exited with code $?; powering off"
poweroff -f
`;
}

/** udhcpc's event script: configure the address, router and resolver it was given. */
export function udhcpcScript(): string {
  return `#!/bin/sh
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/\${mask:-24}" dev "$interface"
    for r in $router; do ip route add default via "$r" dev "$interface"; break; done
    : > /etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
    ;;
esac
exit 0
`;
}

/** The busybox applets /init and its scripts use (links to /usr/bin/busybox). */
export const BUSYBOX_APPLETS = [
  'sh',
  'mount',
  'umount',
  'mkdir',
  'insmod',
  'modprobe',
  'ip',
  'udhcpc',
  'cat',
  'tr',
  'sed',
  'base64',
  'echo',
  'ls',
  'grep',
  'head',
  'sleep',
  'poweroff',
  'reboot',
  'dmesg',
  'ps',
  'ln',
  'rm',
  'mknod',
  'uname',
  'dd',
  'blockdev',
];
