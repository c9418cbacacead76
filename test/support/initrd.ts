/**
 * A tiny initrd for the measured-boot proof (test/node-image/vm-boot.test.ts): busybox (static) and an /init that
 * mounts proc, sysfs, devtmpfs and securityfs, prints the boot report (test/support/vm-boot.ts parses it) on the
 * console and powers off. Written as a cpio "newc" archive by our own few lines, reproducibly: fixed inode numbers,
 * owner root, mtime 0, entries in a fixed order, so the same inputs give the same bytes (and so the same PCRs).
 */

export interface CpioEntry {
  path: string;
  /** Full st_mode: type bits | permission bits (0o040755 directory, 0o100755 file, 0o020600 char device). */
  mode: number;
  data?: Buffer;
  /** Device number of a device node (major, minor). */
  rdev?: [number, number];
}

function header(fields: number[]): string {
  return '070701' + fields.map((f) => f.toString(16).padStart(8, '0')).join('');
}

function pad4(length: number): Buffer {
  return Buffer.alloc((4 - (length % 4)) % 4);
}

/** A cpio newc archive of the entries, in the order given, with the TRAILER!!! record. */
export function cpioNewc(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  const add = (name: string, fields: number[], data: Buffer) => {
    const head = Buffer.from(header(fields) + name + '\0', 'latin1');
    parts.push(head, pad4(head.length), data, pad4(data.length));
  };
  entries.forEach((e, i) => {
    const data = e.data ?? Buffer.alloc(0);
    const name = e.path.replace(/^\/+/, '');
    // ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor, namesize, check
    add(
      name,
      [
        i + 1,
        e.mode,
        0,
        0,
        (e.mode & 0o170000) === 0o040000 ? 2 : 1,
        0,
        data.length,
        0,
        0,
        e.rdev?.[0] ?? 0,
        e.rdev?.[1] ?? 0,
        Buffer.byteLength(name, 'latin1') + 1,
        0,
      ],
      data,
    );
  });
  add('TRAILER!!!', [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 11, 0], Buffer.alloc(0));
  return Buffer.concat(parts);
}

/**
 * The /init script: mounts what the report needs, prints it on the console, powers off. Kernel messages are off
 * the console first (console loglevel 1: emergencies only): the kernel writes them straight to the serial port,
 * into the middle of a report line if it comes to that, and the report would be damaged.
 */
export const BOOT_REPORT_INIT = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
mount -t proc proc /proc
echo 1 > /proc/sys/kernel/printk
mount -t sysfs sysfs /sys
mount -t securityfs securityfs /sys/kernel/security
for n in $(seq 0 23); do
  echo "CONSTELLATION-BOOT pcr-sha256 $n $(tr 'A-F' 'a-f' < /sys/class/tpm/tpm0/pcr-sha256/$n)"
done
base64 -w 96 /sys/kernel/security/tpm0/binary_bios_measurements | sed 's/^/CONSTELLATION-BOOT eventlog /'
echo "CONSTELLATION-BOOT end"
sync
poweroff -f
`;

/** The boot-report initrd: busybox + /init (+ `extra` files, e.g. to change one byte of it). */
export function bootReportInitrd(busybox: Buffer, extra: readonly CpioEntry[] = []): Buffer {
  return cpioNewc([
    { path: 'bin', mode: 0o040755 },
    { path: 'bin/busybox', mode: 0o100755, data: busybox },
    { path: 'dev', mode: 0o040755 },
    { path: 'dev/console', mode: 0o020600, rdev: [5, 1] },
    { path: 'init', mode: 0o100755, data: Buffer.from(BOOT_REPORT_INIT) },
    { path: 'proc', mode: 0o040755 },
    { path: 'sys', mode: 0o040755 },
    ...extra,
  ]);
}
