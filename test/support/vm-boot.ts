/**
 * Boots a raw disk image as a VM node would boot: QEMU (q35) + OVMF (UEFI firmware, the qemu provider's default) +
 * swtpm as the TPM (tpm-crb, with a qemu node's PCR banks: SHA-256 only), and reads the boot report the guest prints
 * on its serial console:
 *
 *     CONSTELLATION-BOOT pcr-sha256 <N> <64 lowercase hex>   N = 0..23, from /sys/class/tpm/tpm0/pcr-sha256/N
 *     CONSTELLATION-BOOT eventlog <base64 chunk>            repeated: /sys/kernel/security/tpm0/binary_bios_measurements
 *     CONSTELLATION-BOOT end
 *
 * (the test initrd of test/support/initrd.ts prints it, and so does the init of a real node image). The boot path is
 * the one `image measure` predicts: -nodefaults and the disk as the only, explicit boot option (bootindex=1), so no
 * boot option fails before the image's and PCR 4 holds exactly the three stages. TCG by default: on this machine
 * a Debian kernel hangs under KVM (docs/measured-boot.md); `accel: 'kvm'` where a probe boot shows it works.
 * Everything started is killed by PID and the scratch folder removed, also on timeout or failure.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  constants,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { QEMU_DEFAULTS } from '../../lib/config/defaults.js';
import { startSwtpm, type SwtpmHandle } from '../../lib/tpm/swtpm.js';
import { VM_PCR_BANKS } from '../../providers/qemu/vm-machine.js';

/** The qemu provider's default firmware (lib/config/defaults.ts). */
export const OVMF_CODE = QEMU_DEFAULTS.firmware;
export const OVMF_VARS = QEMU_DEFAULTS.firmwareVars;
const REPORT = 'CONSTELLATION-BOOT ';

export interface BootReport {
  /** PCR index → SHA-256 bank value, lowercase hex. */
  pcrs: Map<number, string>;
  /** The TCG event log the guest kernel exposes. */
  eventLog: Buffer;
}

export interface BootResult {
  report: BootReport;
  /** Wall time from starting QEMU to the report's end line. */
  bootMs: number;
  serial: string;
}

export interface BootOptions {
  accel?: 'tcg' | 'kvm';
  memoryMiB?: number;
  cpus?: number;
  timeoutMs?: number;
}

/** Parses a boot report out of serial console output; throws naming what is missing. */
export function parseBootReport(serial: string): BootReport {
  const pcrs = new Map<number, string>();
  const chunks: string[] = [];
  let ended = false;
  for (const raw of serial.split(/\r?\n/)) {
    const at = raw.indexOf(REPORT);
    if (at === -1) continue;
    const [kind, ...rest] = raw
      .slice(at + REPORT.length)
      .trim()
      .split(/\s+/);
    if (kind === 'pcr-sha256' && rest.length === 2 && /^[0-9a-f]{64}$/.test(rest[1]!))
      pcrs.set(Number(rest[0]), rest[1]!);
    else if (kind === 'eventlog' && rest.length === 1) chunks.push(rest[0]!);
    else if (kind === 'end') ended = true;
  }
  if (!ended) throw new Error('the boot report has no end line');
  if (pcrs.size !== 24) throw new Error(`the boot report has ${pcrs.size} of 24 PCRs`);
  return { pcrs, eventLog: Buffer.from(chunks.join(''), 'base64') };
}

function kill(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null || child.pid === undefined)
    return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    process.kill(child.pid!, 'SIGKILL');
  });
}

function waitFor(
  check: () => boolean,
  timeoutMs: number,
  what: string,
  failed: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const tick = () => {
      const failure = failed();
      if (check()) return resolve();
      if (failure) return reject(new Error(failure));
      if (Date.now() > deadline) return reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      setTimeout(tick, 100);
    };
    tick();
  });
}

/** Boots `diskPath` (read-only for the guest) and returns the report it printed. */
export async function bootDisk(diskPath: string, options: BootOptions = {}): Promise<BootResult> {
  const dir = mkdtempSync(path.join(tmpdir(), 'vm-boot-'));
  let swtpm: SwtpmHandle | undefined;
  let qemu: ChildProcess | undefined;
  const stderr: string[] = [];
  try {
    const vars = path.join(dir, 'OVMF_VARS.fd');
    copyFileSync(OVMF_VARS, vars);
    const serialPath = path.join(dir, 'serial.log');
    swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm'), pcrBanks: VM_PCR_BANKS, attach: 'vm' });
    const ctrl = swtpm.ctrlSocket;
    const started = Date.now();
    qemu = spawn(
      'qemu-system-x86_64',
      [
        '-machine',
        'q35',
        '-accel',
        options.accel ?? 'tcg',
        '-m',
        String(options.memoryMiB ?? 1024),
        '-smp',
        String(options.cpus ?? 2),
        '-nodefaults',
        '-display',
        'none',
        '-no-reboot',
        '-serial',
        `file:${serialPath}`,
        '-drive',
        `if=pflash,format=raw,unit=0,readonly=on,file=${OVMF_CODE}`,
        '-drive',
        `if=pflash,format=raw,unit=1,file=${vars}`,
        '-drive',
        `if=none,id=disk,format=raw,readonly=on,file=${path.resolve(diskPath)}`,
        '-device',
        'virtio-blk-pci,drive=disk,bootindex=1',
        '-chardev',
        `socket,id=tpmchr,path=${ctrl}`,
        '-tpmdev',
        'emulator,id=tpm0,chardev=tpmchr',
        '-device',
        'tpm-crb,tpmdev=tpm0',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    qemu.stderr?.on('data', (d: Buffer) => stderr.push(`qemu: ${d.toString()}`));
    const serial = () => (existsSync(serialPath) ? readFileSync(serialPath, 'latin1') : '');
    let ended = false;
    await waitFor(
      () => (ended = /CONSTELLATION-BOOT end/.test(serial())),
      options.timeoutMs ?? 180_000,
      'the boot report on the serial console',
      () =>
        qemu!.exitCode !== null && !/CONSTELLATION-BOOT end/.test(serial())
          ? `QEMU exited (${qemu!.exitCode}) before the boot report ended: ${stderr.join('')}\nserial tail:\n${serial().slice(-2000)}`
          : undefined,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nserial tail:\n${serial().slice(-2000)}`);
    });
    const bootMs = Date.now() - started;
    const text = serial();
    if (!ended) throw new Error('no boot report');
    return { report: parseBootReport(text), bootMs, serial: text };
  } finally {
    await kill(qemu);
    await swtpm?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Which accelerator boots this disk: KVM when /dev/kvm is usable and a probe boot under KVM reaches the boot report
 * within `probeMs`, else TCG. The answer is remembered in `rememberIn` (a file; keyed by the caller, e.g. by
 * kernel), because a failed probe costs its whole timeout: on machines whose KVM runs only PVM-enabled guest kernels
 * a Debian kernel hangs right after decompression.
 */
export async function chooseAccel(diskPath: string, rememberIn: string, probeMs = 60_000): Promise<'tcg' | 'kvm'> {
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
  } catch {
    return 'tcg';
  }
  if (existsSync(rememberIn)) return readFileSync(rememberIn, 'utf8').trim() === 'kvm' ? 'kvm' : 'tcg';
  let accel: 'tcg' | 'kvm' = 'tcg';
  try {
    await bootDisk(diskPath, { accel: 'kvm', timeoutMs: probeMs });
    accel = 'kvm';
  } catch {
    accel = 'tcg';
  }
  writeFileSync(rememberIn, `${accel}\n`);
  return accel;
}
