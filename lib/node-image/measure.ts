/**
 * Predicts, from a node image file alone (a raw GPT disk or a bare unified kernel image), the PCR values and event
 * log that UEFI firmware, systemd-stub 252 and the Linux 6.1 EFI stub produce when they boot it. These are the
 * measurements `image build` signs and every verifier enforces, so each event below is the byte-exact encoding a
 * real OVMF + swtpm boot of our images logs (checked by test/node-image/vm-boot.test.ts; docs/measured-boot.md
 * explains every PCR and the boot path assumed). Upstream's image/measured-boot is the reference for the rules.
 *
 *   PCR 4  (firmware)     EV_EFI_ACTION "Calling EFI Application from Boot Option", EV_SEPARATOR, then
 *                         EV_EFI_BOOT_SERVICES_APPLICATION for the UKI (its Authenticode digest) and for the
 *                         kernel the stub loads with LoadImage (the .linux section's Authenticode digest).
 *                         Assumes no boot option failed before the image's (each failure adds two events).
 *   PCR 11 (systemd-stub) for each UKI section the stub knows, in its order (.linux .osrel .cmdline .initrd
 *                         .splash .dtb .pcrpkey): EV_IPL SHA-256(name + NUL), then EV_IPL SHA-256(data up to
 *                         VirtualSize).
 *   PCR 9  (Linux stub)   EV_EVENT_TAG "LOADED_IMAGE::LoadOptions" = SHA-256 of the command line as UTF-16LE with
 *                         its NUL (what the stub passes), then EV_EVENT_TAG "Linux initrd" = SHA-256 of the initrd.
 *
 * Events are listed in the order a boot logs them (the stub measures its sections before it loads the kernel).
 * Our own code: upstream's predictor is a Go program that shells out to systemd-dissect; no JavaScript library
 * predicts UEFI/systemd-stub measurements.
 *   PCR 8, 12, 13         untouched (zero): no GRUB, no command line from outside the UKI, no system extensions.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { UserError } from '../errors.js';
import { authenticodeDigest } from './authenticode.js';
import { findEspBootFile, findEspBootFileIn, looksLikeGptDisk } from './disk.js';
import { looksLikePe, parsePe, sectionData } from './pe.js';
import { STUB_252_MEASURED_SECTIONS } from './uki.js';

export const EV_SEPARATOR = 0x00000004;
export const EV_EVENT_TAG = 0x00000006;
export const EV_IPL = 0x0000000d;
export const EV_EFI_BOOT_SERVICES_APPLICATION = 0x80000003;
export const EV_EFI_ACTION = 0x80000007;

export const EVENT_TYPE_NAMES: Record<number, string> = {
  [EV_SEPARATOR]: 'EV_SEPARATOR',
  [EV_EVENT_TAG]: 'EV_EVENT_TAG',
  [EV_IPL]: 'EV_IPL',
  [EV_EFI_BOOT_SERVICES_APPLICATION]: 'EV_EFI_BOOT_SERVICES_APPLICATION',
  [EV_EFI_ACTION]: 'EV_EFI_ACTION',
};

export const CALLING_EFI_APPLICATION = 'Calling EFI Application from Boot Option';
/** The PCRs a prediction states: those it extends and those that must stay zero. */
export const PREDICTED_PCRS = [4, 8, 9, 11, 12, 13] as const;

export interface PredictedEvent {
  pcr: number;
  /** TCG event type name, e.g. EV_EFI_ACTION. */
  type: string;
  /** SHA-256 digest extended into the PCR, lowercase hex. */
  digest: string;
  description: string;
}

export interface BootMeasurements {
  /** PCR index → predicted SHA-256 bank value, lowercase hex. */
  pcrs: Record<number, string>;
  events: PredictedEvent[];
  /** Where the UKI came from: a bare UKI, or the path inside a disk's EFI system partition. */
  source: { kind: 'uki' } | { kind: 'disk'; path: string; partition: number };
}

function sha256(data: Buffer | string): Buffer {
  return createHash('sha256').update(data).digest();
}

class PcrSimulator {
  readonly bank = new Map<number, Buffer>(PREDICTED_PCRS.map((i) => [i, Buffer.alloc(32)]));
  readonly events: PredictedEvent[] = [];

  extend(pcr: number, type: number, digest: Buffer, description: string): void {
    this.bank.set(pcr, sha256(Buffer.concat([this.bank.get(pcr) ?? Buffer.alloc(32), digest])));
    this.events.push({
      pcr,
      type: EVENT_TYPE_NAMES[type] ?? `0x${type.toString(16)}`,
      digest: digest.toString('hex'),
      description,
    });
  }
}

/** The command line as systemd-stub 252 hands it to the kernel: the .cmdline bytes up to the first NUL, as UTF-16LE + NUL. */
export function stubLoadOptions(cmdline: Buffer): Buffer {
  const nul = cmdline.indexOf(0);
  const text = cmdline.subarray(0, nul === -1 ? cmdline.length : nul);
  if (text.some((b) => b >= 0x80 || b < 0x20)) {
    throw new UserError("the UKI's kernel command line has non-ASCII bytes or control characters (such as a newline)", {
      hint: 'Use a printable ASCII command line without a trailing newline: how systemd-stub converts other bytes is not predicted.',
    });
  }
  const out = Buffer.alloc((text.length + 1) * 2);
  text.forEach((b, i) => out.writeUInt16LE(b, i * 2));
  return out;
}

/** Predicts the boot measurements of a UKI's bytes. */
export function predictUkiMeasurements(uki: Buffer): Omit<BootMeasurements, 'source'> {
  const pe = parsePe(uki);
  const sections = new Map(pe.sections.map((s) => [s.name, s]));
  const linux = sections.get('.linux');
  if (!linux) {
    throw new UserError('the EFI application is not a unified kernel image: it has no .linux section', {
      hint: 'Pass a node image (raw disk) or a UKI built by `constellation image build`.',
    });
  }
  const kernel = sectionData(uki, linux);
  let kernelDigest: Buffer;
  try {
    if (!looksLikePe(kernel)) throw new UserError('no PE header');
    kernelDigest = authenticodeDigest(kernel);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    throw new UserError(
      `the UKI's .linux section is not an EFI-stub kernel (${err.message}): firmware would not start it, so PCR 4 cannot be predicted`,
      {
        hint: "Build the UKI with a kernel that has the EFI stub (Debian's vmlinuz does).",
      },
    );
  }
  const sim = new PcrSimulator();
  // PCR 4: the firmware's boot manager and LoadImage (TCG PC Client Platform Firmware Profile 2.0, §3.3.4.5).
  sim.extend(4, EV_EFI_ACTION, sha256(CALLING_EFI_APPLICATION), CALLING_EFI_APPLICATION);
  sim.extend(4, EV_SEPARATOR, sha256(Buffer.alloc(4)), 'separator');
  sim.extend(
    4,
    EV_EFI_BOOT_SERVICES_APPLICATION,
    authenticodeDigest(uki, 'sha256', pe),
    'Boot stage 1: the unified kernel image (Authenticode)',
  );
  // PCR 11: systemd-stub's section measurements.
  for (const name of STUB_252_MEASURED_SECTIONS) {
    const section = sections.get(name);
    if (!section) continue;
    const data = sectionData(uki, section);
    sim.extend(11, EV_IPL, sha256(Buffer.from(`${name}\0`, 'latin1')), `UKI section name: ${name}`);
    sim.extend(11, EV_IPL, sha256(data), `UKI section data: ${name} (${data.length} bytes)`);
  }
  // The stub measures its sections before it loads the kernel, so the kernel's PCR 4 event follows them in the log.
  sim.extend(4, EV_EFI_BOOT_SERVICES_APPLICATION, kernelDigest, 'Boot stage 2: the kernel in .linux (Authenticode)');
  // PCR 9: the Linux EFI stub measures its LoadOptions and the initrd it loads through LINUX_EFI_INITRD_MEDIA.
  const cmdline = sections.get('.cmdline');
  if (cmdline) {
    const raw = sectionData(uki, cmdline);
    const text = raw.subarray(0, raw.indexOf(0) === -1 ? raw.length : raw.indexOf(0)).toString('latin1');
    sim.extend(
      9,
      EV_EVENT_TAG,
      sha256(stubLoadOptions(raw)),
      `LOADED_IMAGE::LoadOptions (the command line): ${JSON.stringify(text)}`,
    );
  }
  const initrd = sections.get('.initrd');
  if (initrd) {
    const data = sectionData(uki, initrd);
    sim.extend(9, EV_EVENT_TAG, sha256(data), `Linux initrd (${data.length} bytes)`);
  }
  const pcrs: Record<number, string> = {};
  for (const [index, value] of [...sim.bank].sort((a, b) => a[0] - b[0])) pcrs[index] = value.toString('hex');
  return { pcrs, events: sim.events };
}

/**
 * Predicts the boot measurements of an image file's bytes: a raw GPT disk (the UKI at \EFI\BOOT\BOOTX64.EFI of
 * its EFI system partition) or a bare UKI.
 */
export function predictBootMeasurements(fileBytesOrUki: Buffer): BootMeasurements {
  if (looksLikePe(fileBytesOrUki)) return { ...predictUkiMeasurements(fileBytesOrUki), source: { kind: 'uki' } };
  if (looksLikeGptDisk(fileBytesOrUki)) {
    const boot = findEspBootFile(fileBytesOrUki);
    return {
      ...predictUkiMeasurements(boot.data),
      source: { kind: 'disk', path: boot.path, partition: boot.partition },
    };
  }
  throw notAnImage();
}

function notAnImage(): UserError {
  return new UserError('not a node image: the file is neither a raw GPT disk nor a PE image (UKI)', {
    hint: 'Pass the raw disk `image build` writes (a fixed VHD works too) or a unified kernel image (.efi). Convert qcow2 or a GCE tar.gz to a raw disk first.',
  });
}

/** UKIs are tens of MiB; a larger PE file is not one we boot. */
const MAX_UKI_BYTES = 1024 * 1024 * 1024;
const DISK_HEAD_BYTES = 1024 * 1024;

export interface UkiSectionDigest {
  name: string;
  /** VirtualSize: the bytes the stub measures and uses. */
  size: number;
  /** SHA-256 of the section's data up to its VirtualSize, lowercase hex. */
  digest: string;
  /** Whether systemd-stub 252 measures it into PCR 11. */
  measured: boolean;
}

/** Every section of the UKI with its SHA-256 (as upstream's measured-boot tool lists them), in section-table order. */
export function ukiSectionDigests(uki: Buffer): UkiSectionDigest[] {
  return parsePe(uki).sections.map((s) => ({
    name: s.name,
    size: s.virtualSize,
    digest: sha256(sectionData(uki, s)).toString('hex'),
    measured: (STUB_252_MEASURED_SECTIONS as readonly string[]).includes(s.name),
  }));
}

export interface ImageInspection {
  source: BootMeasurements['source'];
  sections: UkiSectionDigest[];
  /** The prediction, or why none can be made (e.g. a .linux that is no EFI kernel). */
  prediction: BootMeasurements | { error: UserError };
}

/** What `image measure` shows: the UKI's sections and, when the image is bootable, the predicted measurements. */
export function inspectImageFile(file: string): ImageInspection {
  const { uki, source } = readImageUki(file);
  const sections = ukiSectionDigests(uki);
  try {
    return { source, sections, prediction: { ...predictUkiMeasurements(uki), source } };
  } catch (err) {
    if (err instanceof UserError) return { source, sections, prediction: { error: err } };
    throw err;
  }
}

/** Predicts the boot measurements of an image file on disk (see readImageUki). */
export function predictBootMeasurementsOfFile(file: string): BootMeasurements {
  const { uki, source } = readImageUki(file);
  return { ...predictUkiMeasurements(uki), source };
}

/**
 * The UKI of an image file: the file itself, or \EFI\BOOT\BOOTX64.EFI of a raw GPT disk's EFI system partition.
 * A raw disk is not read whole: only its GPT and its EFI system partition are, so multi-GiB disks work.
 */
export function readImageUki(file: string): { uki: Buffer; source: BootMeasurements['source'] } {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new UserError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, {
      hint: 'Pass the path of a node image (raw disk) or a unified kernel image.',
      cause: err,
    });
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile())
      throw new UserError(`${file} is not a regular file`, {
        hint: 'Pass the path of a node image (raw disk) or a unified kernel image.',
      });
    const readRange = (offset: number, length: number): Buffer => {
      const buf = Buffer.alloc(Math.max(0, Math.min(length, stat.size - offset)));
      let done = 0;
      while (done < buf.length) {
        const n = readSync(fd, buf, done, buf.length - done, offset + done);
        if (n === 0) break;
        done += n;
      }
      return buf.subarray(0, done);
    };
    const head = readRange(0, DISK_HEAD_BYTES);
    if (looksLikePe(head)) {
      if (stat.size > MAX_UKI_BYTES)
        throw new UserError(`${file} is a PE image of ${stat.size} bytes, too large for a UKI`);
      return { uki: readRange(0, stat.size), source: { kind: 'uki' } };
    }
    if (looksLikeGptDisk(head)) {
      const boot = findEspBootFileIn(head, readRange);
      return { uki: boot.data, source: { kind: 'disk', path: boot.path, partition: boot.partition } };
    }
    throw notAnImage();
  } finally {
    closeSync(fd);
  }
}
