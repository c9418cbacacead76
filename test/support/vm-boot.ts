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
 * Everything started is killed by PID and the scratch folder removed, also on timeout or failure. A report that
 * a kernel message damaged on the console is refused (DamagedBootReportError), and bootDisk boots once more.
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
import { EventLogError, parseEventLog } from '../../lib/attestation/eventlog.js';
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

/**
 * A boot report whose lines were damaged on the way: a kernel message written into the middle of a report line
 * (the guest's kernel writes to the serial port directly, past the tty its /init writes through), which splits
 * the line or adds words to it. Distinct from an incomplete report (no end line): a damaged one is worth a
 * second boot. `problems` name each damaged line; an excerpt holds only console text (event-log base64, kernel
 * messages), nothing secret.
 */
export class DamagedBootReportError extends Error {
  override readonly name = 'DamagedBootReportError';
  constructor(readonly problems: readonly string[]) {
    super(
      `The boot report is damaged: ${problems.slice(0, 3).join('; ')}` +
        (problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''),
    );
  }
}

const BASE64_BODY = /^[A-Za-z0-9+/]+$/;
const BASE64_TAIL = /^[A-Za-z0-9+/]*={0,2}$/;
const PCR_VALUE = /^[0-9a-fA-F]{64}$/;
/** The prefix of each report line that has a value, and what a remnant of that value looks like. */
const REMNANTS: readonly [prefix: string, rest: RegExp][] = [
  [`${REPORT}eventlog `, /^[A-Za-z0-9+/]+={0,2}$/],
  [`${REPORT}pcr-sha256 `, /^\d*\s*[0-9a-fA-F]*$/],
];

/** Up to ~24 characters before `at` and ~48 from it, quoted, so a message shows where a line went wrong. */
function excerpt(text: string, at = 0): string {
  const from = Math.max(0, at - 24);
  const to = Math.min(text.length, at + 48);
  return JSON.stringify(`${from > 0 ? '…' : ''}${text.slice(from, to)}${to < text.length ? '…' : ''}`);
}

/**
 * A line among report lines that has no report prefix but looks like the rest of a report line a kernel message
 * cut: a lone base64 word (the continuation of a cut chunk or PCR value; kernel messages have several words), or
 * a tail of a report line's prefix followed by what its value looks like.
 */
function looksLikeReportRemnant(line: string): boolean {
  const text = line.trim();
  if (text.length > 0 && BASE64_TAIL.test(text)) return true;
  return REMNANTS.some(([prefix, rest]) => {
    for (let i = 1; i < prefix.length; i++) {
      const tail = prefix.slice(i).trim();
      if (tail.length > 0 && text.startsWith(tail) && rest.test(text.slice(tail.length).trim())) return true;
    }
    return false;
  });
}

/**
 * Parses a boot report out of serial console output: the lines from the first report line to the first end line.
 * Throws naming what is missing (no end line, fewer than 24 PCRs), or a DamagedBootReportError when any report line
 * was damaged: a report line with extra words or a cut value, a prefixless remnant of one, or event-log chunks that
 * are not the fixed-width lines `base64` prints (every chunk but the last as long as the others, the last a valid
 * tail) or that decode to no TCG event log. A damaged report is never returned: the event log it gave would shift
 * and a parser would read garbage sizes from it.
 */
export function parseBootReport(serial: string): BootReport {
  const pcrs = new Map<number, string>();
  const chunks: { text: string; line: number }[] = [];
  const problems: string[] = [];
  let started = false;
  let ended = false;
  const lines = serial.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = index + 1;
    const at = raw.indexOf(REPORT);
    if (at === -1) {
      if (started && looksLikeReportRemnant(raw))
        problems.push(`serial line ${line} looks like the rest of a report line a kernel message cut: ${excerpt(raw)}`);
      continue;
    }
    started = true;
    const body = raw.slice(at + REPORT.length);
    const [kind = '', ...rest] = body.trim().split(/\s+/);
    if (kind === 'pcr-sha256') {
      if (rest.length !== 2 || !/^\d+$/.test(rest[0]!) || !PCR_VALUE.test(rest[1]!))
        problems.push(
          `serial line ${line} is not "pcr-sha256 <N> <64 hex>": ${excerpt(body, /^\s*pcr-sha256\s+\d*\s*[0-9a-fA-F]*/.exec(body)![0].length)}`,
        );
      // A value in uppercase is well-formed but not what the report prints: it is left out, and the count says so.
      else if (/^[0-9a-f]{64}$/.test(rest[1]!)) pcrs.set(Number(rest[0]), rest[1]!);
    } else if (kind === 'eventlog') {
      if (rest.length === 1) chunks.push({ text: rest[0]!, line });
      else {
        // Point the excerpt at where the base64 stops: there the kernel message starts.
        const value = body.indexOf('eventlog') + 'eventlog'.length;
        const stop = value + /^\s*[A-Za-z0-9+/=]*/.exec(body.slice(value))![0].length;
        problems.push(
          `serial line ${line} (event-log chunk ${chunks.length + 1}) has ${rest.length} words where one base64 chunk belongs: ${excerpt(body, stop)}`,
        );
      }
    } else if (kind.startsWith('end')) {
      // Whatever bootDisk took for the end line (it waits for "CONSTELLATION-BOOT end") ends the report here too.
      ended = true;
      if (kind !== 'end' || rest.length > 0) problems.push(`serial line ${line} is not "end": ${excerpt(body)}`);
      break;
    } else problems.push(`serial line ${line} is a report line of no known kind: ${excerpt(body)}`);
  }
  if (!ended) throw new Error('the boot report has no end line');
  problems.push(...eventLogChunkProblems(chunks));
  if (problems.length > 0) throw new DamagedBootReportError(problems);
  if (pcrs.size !== 24) throw new Error(`the boot report has ${pcrs.size} of 24 PCRs`);
  const eventLog = Buffer.from(chunks.map((c) => c.text).join(''), 'base64');
  if (eventLog.length > 0) {
    try {
      parseEventLog(eventLog);
    } catch (err) {
      // Every line well-formed and still no event log: a whole line may be gone without a trace.
      if (!(err instanceof EventLogError)) throw err;
      throw new DamagedBootReportError([
        `its ${chunks.length} event-log chunks (serial lines ${chunks[0]!.line}-${chunks.at(-1)!.line}) are well-formed base64 ` +
          `but decode to no TCG event log (${err.message}): a whole line may be missing`,
      ]);
    }
  }
  return { pcrs, eventLog };
}

/**
 * What is wrong with the event-log chunks as `base64` prints them: lines of one fixed width (96 for the test
 * initrd's `base64 -w 96`, 76 for the node image's `base64`), the last one no longer and padded only at its very
 * end, together a multiple of 4 characters that decodes to bytes which encode back to the same text.
 */
function eventLogChunkProblems(chunks: readonly { text: string; line: number }[]): string[] {
  if (chunks.length === 0) return [];
  const problems: string[] = [];
  const name = (i: number) => `serial line ${chunks[i]!.line} (event-log chunk ${i + 1} of ${chunks.length})`;
  // The width most full lines have, so that one cut line is named rather than every other one.
  const counts = new Map<number, number>();
  for (const c of chunks.slice(0, -1)) counts.set(c.text.length, (counts.get(c.text.length) ?? 0) + 1);
  const width = [...counts].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]?.[0] ?? chunks[0]!.text.length;
  chunks.forEach(({ text }, i) => {
    const last = i === chunks.length - 1;
    if (!(last ? BASE64_TAIL : BASE64_BODY).test(text)) {
      const bad = text.search(last ? /[^A-Za-z0-9+/=]|=(?=[^=])|={3}/ : /[^A-Za-z0-9+/]/);
      problems.push(`${name(i)} has a character outside base64 at ${bad + 1}: ${excerpt(text, bad)}`);
    } else if (!last && text.length !== width)
      problems.push(
        `${name(i)} has ${text.length} characters, the other lines ${width}: ${excerpt(text, text.length)}`,
      );
    else if (last && (text.length === 0 || text.length > width))
      problems.push(`${name(i)}, the last, has ${text.length} characters, the other lines ${width}: ${excerpt(text)}`);
  });
  if (problems.length > 0) return problems;
  const joined = chunks.map((c) => c.text).join('');
  if (joined.length % 4 !== 0)
    return [`the ${chunks.length} event-log chunks total ${joined.length} characters, not a multiple of 4`];
  if (Buffer.from(joined, 'base64').toString('base64') !== joined)
    return [`${name(chunks.length - 1)} does not decode cleanly: ${excerpt(chunks.at(-1)!.text)}`];
  return [];
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

/**
 * Boots `diskPath` (read-only for the guest) and returns the report it printed. A damaged report (a kernel message
 * cut one of its lines) says nothing about the image, so the disk is booted once more in a fresh VM.
 */
export function bootDisk(diskPath: string, options: BootOptions = {}): Promise<BootResult> {
  return retryDamagedReport(() => bootDiskOnce(diskPath, options), path.basename(diskPath));
}

/**
 * Runs `boot`, and once more when it throws a DamagedBootReportError, saying so in one line on `log`; the second
 * run's result or error is the answer. Any other error is thrown as it is: a timeout or a missing end line is no
 * console accident, and a second boot would only double the wait.
 */
export async function retryDamagedReport<T>(
  boot: () => Promise<T>,
  what: string,
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<T> {
  try {
    return await boot();
  } catch (err) {
    if (!(err instanceof DamagedBootReportError)) throw err;
    log(
      `vm-boot: ${what}: damaged boot report (${err.problems[0]!.replace(/\s+/g, ' ').slice(0, 200)}); booting once more`,
    );
    return await boot();
  }
}

/** One boot of `diskPath`: its own scratch folder, swtpm and QEMU, all gone when it returns or throws. */
async function bootDiskOnce(diskPath: string, options: BootOptions): Promise<BootResult> {
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
    await bootDiskOnce(diskPath, { accel: 'kvm', timeoutMs: probeMs });
    accel = 'kvm';
  } catch (err) {
    // A damaged report still reached the report: the question was whether KVM boots this kernel.
    accel = err instanceof DamagedBootReportError ? 'kvm' : 'tcg';
  }
  writeFileSync(rememberIn, `${accel}\n`);
  return accel;
}
