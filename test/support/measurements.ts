/** Measurement sets for tests: every image PCR (the store and the validators refuse less), each PCR one byte repeated. */
import { IMAGE_PCRS } from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';

/** Every image PCR expected as `byte` repeated 32 times, enforced; `overrides` replace or add PCRs. */
export function imageMeasurements(byte = '00', overrides: Measurements = {}): Measurements {
  return {
    ...Object.fromEntries(IMAGE_PCRS.map((i) => [String(i), { expected: byte.repeat(32), warnOnly: false }])),
    ...overrides,
  };
}
