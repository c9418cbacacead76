/**
 * Comparing verified PCR values with the config's measurements (docs/design.md#attestation, last step), and the mismatch report
 * operators read: one line per PCR naming the expected and the actual value and whether it is enforced. Also the
 * differences between two sets of measurements (an upgrade's).
 */
import { createHash } from 'node:crypto';
import type { Measurements, PcrComparison } from './types.js';
import { AttestationError } from './types.js';

/** One comparison per measured PCR, ascending by index. A PCR missing from `pcrs` never matches. */
export function comparePcrs(measurements: Measurements, pcrs: Map<number, Uint8Array>): PcrComparison[] {
  return measuredIndices(measurements).map((index) => {
    const m = measurements[String(index)];
    const expected = m.expected.toLowerCase();
    const value = pcrs.get(index);
    const actual = value === undefined ? undefined : Buffer.from(value).toString('hex');
    return { index, expected, actual, warnOnly: m.warnOnly, match: actual === expected };
  });
}

/** "PCR 9: expected ab12…, got cd34… (enforced)" for every mismatch, one per line. */
export function formatMismatchReport(comparisons: PcrComparison[]): string {
  return comparisons
    .filter((c) => !c.match)
    .map(formatMismatch)
    .join('\n');
}

export function formatMismatch(c: PcrComparison): string {
  return `PCR ${c.index}: expected ${c.expected}, got ${c.actual ?? '(not in the quote)'} (${c.warnOnly ? 'warn only' : 'enforced'})`;
}

/** Checks the measurements themselves: indices 0–23, hex values of one length; returns the digest size in bytes. */
export function validateMeasurements(measurements: Measurements): number | undefined {
  let size: number | undefined;
  for (const [key, m] of Object.entries(measurements)) {
    const index = Number(key);
    if (!Number.isInteger(index) || index < 0 || index > 23 || String(index) !== key) {
      throw new AttestationError(`Measurement "${key}" is not a PCR index (0 to 23)`, undefined, {
        hint: 'Fix the measurements in the config.',
      });
    }
    if (typeof m?.expected !== 'string' || !/^([0-9a-fA-F]{2})+$/.test(m.expected) || typeof m.warnOnly !== 'boolean') {
      throw new AttestationError(
        `Measurement of PCR ${key} needs a hex "expected" value and a boolean "warnOnly"`,
        undefined,
        { hint: 'Fix the measurements in the config.' },
      );
    }
    const len = m.expected.length / 2;
    if (size !== undefined && len !== size) {
      throw new AttestationError(
        `Measurements mix digest sizes (${size} and ${len} bytes): all must be of one PCR bank`,
        undefined,
        { hint: 'Fix the measurements in the config.' },
      );
    }
    size = len;
  }
  return size;
}

function measuredIndices(measurements: Measurements): number[] {
  return Object.keys(measurements)
    .map(Number)
    .sort((a, b) => a - b);
}

/** The PCRs a node image defines (docs/design.md#attestation): boot chain, initramfs/cmdline, unified kernel image, and the zero ones. */
export const IMAGE_PCRS = [4, 8, 9, 11, 12, 13] as const;

/**
 * Why a set of measurements cannot say what a node runs, or undefined when it can: every image PCR must be there.
 * An empty or partial set would let any software pass (a validator checks only the PCRs it is given), so the cluster
 * store refuses to hold one and every validator refuses to be made from one. (Whether a PCR only warns is the signed
 * file's decision: measurements reach the store only after they verified against it.)
 */
export function incompleteMeasurements(measurements: Measurements): string | undefined {
  const missing = IMAGE_PCRS.filter((index) => measurements[String(index)] === undefined);
  if (missing.length === 0) return undefined;
  return `PCR ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing: every image PCR (${IMAGE_PCRS.join(', ')}) must be measured`;
}

/** Throws an AttestationError when the measurements are incomplete (see incompleteMeasurements). */
export function requireCompleteMeasurements(measurements: Measurements): void {
  const reason = incompleteMeasurements(measurements);
  if (reason) {
    throw new AttestationError(`The measurements are incomplete: ${reason}`, undefined, {
      hint: 'Use the signed measurements of the node image (`constellation config fetch-measurements`, or what `create` writes for the local build).',
    });
  }
}

/**
 * A short name for an image's measurements: the first 12 hex digits of SHA-256 over "<index>=<hex>\n" for each image
 * PCR in order. A node computes it from its PCRs as booted, the CLI from the config's expected values; equal digests
 * mean the node runs the image the config expects. Empty when a value is missing.
 */
export function imageMeasurementsDigest(values: Map<number, Uint8Array | string> | Measurements): string {
  const valueOf = (index: number): string | undefined => {
    if (values instanceof Map) {
      const v = values.get(index);
      return v === undefined ? undefined : typeof v === 'string' ? v : Buffer.from(v).toString('hex');
    }
    return values[String(index)]?.expected;
  };
  const lines: string[] = [];
  for (const index of IMAGE_PCRS) {
    const value = valueOf(index);
    if (value === undefined) return '';
    lines.push(`${index}=${value.toLowerCase()}\n`);
  }
  return createHash('sha256').update(lines.join('')).digest('hex').slice(0, 12);
}

/** One PCR whose expected value (or presence) a change of measurements (the config's → an image's) touches. */
export interface PcrChange {
  index: number;
  /** The value before; undefined when the old set does not measure this PCR. */
  from?: string;
  /** The value after; undefined when the new set does not measure it. */
  to?: string;
  warnOnly: boolean;
}

/** The PCRs whose expected value, warn-only flag or presence differ, ascending. */
export function measurementChanges(from: Measurements, to: Measurements): PcrChange[] {
  const indices = [...new Set([...Object.keys(from), ...Object.keys(to)])].map(Number).sort((a, b) => a - b);
  const changes: PcrChange[] = [];
  for (const index of indices) {
    const a = from[String(index)];
    const b = to[String(index)];
    if (a && b && a.expected.toLowerCase() === b.expected.toLowerCase() && a.warnOnly === b.warnOnly) continue;
    changes.push({
      index,
      ...(a ? { from: a.expected.toLowerCase() } : {}),
      ...(b ? { to: b.expected.toLowerCase() } : {}),
      warnOnly: (b ?? a)!.warnOnly,
    });
  }
  return changes;
}
