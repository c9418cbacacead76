/**
 * Which accelerator a qemu node runs under when the config says `accel: auto`: KVM only where a probe boot of the
 * image under KVM reaches its /init's boot report, else TCG (software emulation). A probe is needed because
 * /dev/kvm may exist and still not run the image: on machines whose KVM runs only PVM-enabled guest kernels, a
 * Debian kernel hangs right after decompression (docs/measured-boot.md). A failed probe costs its whole timeout,
 * so the answer is remembered in the user's config folder (qemu-accel.json), keyed by the image's kernel package
 * and its SHA-256 (from the image's manifest); a probe runs at most once per kernel.
 */
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type Accel = 'kvm' | 'tcg';

export interface AccelChoice {
  accel: Accel;
  /** Why: the config, no usable /dev/kvm, a remembered probe, or a probe just run. */
  reason: string;
}

export interface ProbeOptions {
  rawDisk: string;
  firmware: string;
  firmwareVars: string;
  /** The key the answer is remembered under (the image's kernel package). */
  kernelKey: string;
  rememberIn: string;
  probeMs?: number;
  kvmDevice?: string;
}

async function kvmUsable(device: string): Promise<boolean> {
  return fs.access(device, constants.R_OK | constants.W_OK).then(
    () => true,
    () => false,
  );
}

/** Boots the image under KVM without TPM, network or state disk; true when its boot report ends within probeMs. */
export async function probeKvm(
  options: Pick<ProbeOptions, 'rawDisk' | 'firmware' | 'firmwareVars' | 'probeMs'>,
): Promise<boolean> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'qemu-accel-probe-'));
  const serial = path.join(dir, 'serial.log');
  const vars = path.join(dir, 'OVMF_VARS.fd');
  await fs.copyFile(options.firmwareVars, vars);
  const child = spawn(
    'qemu-system-x86_64',
    [
      '-machine',
      'q35',
      '-accel',
      'kvm',
      '-m',
      '1024',
      '-smp',
      '1',
      '-nodefaults',
      '-no-user-config',
      '-display',
      'none',
      '-serial',
      `file:${serial}`,
      '-drive',
      `if=pflash,format=raw,unit=0,readonly=on,file=${options.firmware}`,
      '-drive',
      `if=pflash,format=raw,unit=1,file=${vars}`,
      '-drive',
      `if=none,id=boot,format=raw,readonly=on,file=${options.rawDisk}`,
      '-device',
      'virtio-blk-pci,drive=boot,bootindex=1',
    ],
    { stdio: 'ignore' },
  );
  let exited = false;
  child.once('exit', () => (exited = true));
  child.once('error', () => (exited = true));
  const deadline = Date.now() + (options.probeMs ?? 20_000);
  let booted = false;
  try {
    while (!exited && Date.now() < deadline) {
      const text = await fs.readFile(serial, 'latin1').catch(() => '');
      if (text.includes('CONSTELLATION-BOOT end')) {
        booted = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    if (!exited && child.pid !== undefined) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await gone;
    }
    await fs.rm(dir, { recursive: true, force: true });
  }
  return booted;
}

/** The accelerator for `wanted` (the config's accel): see the module header. */
export async function chooseAccel(
  wanted: 'auto' | Accel,
  options: ProbeOptions,
  probe = probeKvm,
): Promise<AccelChoice> {
  if (wanted !== 'auto') return { accel: wanted, reason: 'set in the config' };
  if (!(await kvmUsable(options.kvmDevice ?? '/dev/kvm'))) return { accel: 'tcg', reason: 'no usable /dev/kvm' };
  const remembered = JSON.parse(await fs.readFile(options.rememberIn, 'utf8').catch(() => '{}')) as Record<
    string,
    Accel
  >;
  const known = remembered[options.kernelKey];
  if (known === 'kvm' || known === 'tcg') {
    return {
      accel: known,
      reason: known === 'kvm' ? 'a probe boot under KVM worked' : 'a probe boot of this kernel under KVM hung',
    };
  }
  const works = await probe(options);
  remembered[options.kernelKey] = works ? 'kvm' : 'tcg';
  await fs.mkdir(path.dirname(options.rememberIn), { recursive: true, mode: 0o700 });
  await fs.writeFile(options.rememberIn, `${JSON.stringify(remembered, null, 2)}\n`, { mode: 0o600 });
  return {
    accel: works ? 'kvm' : 'tcg',
    reason: works ? 'a probe boot under KVM worked' : 'a probe boot of this kernel under KVM hung',
  };
}
