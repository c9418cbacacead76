/**
 * Default measurements per attestation variant: `{ "<PCR index>": { expected: hex, warnOnly } }` (docs/design.md#attestation).
 * PCR meanings of our node images: 4 boot chain, 8 zero, 9 initramfs/cmdline, 11 unified kernel image,
 * 12 and 13 zero, 15 clusterID (zero until the node joins a cluster). Firmware PCRs (0–3, 6, 7) differ per
 * cloud and firmware release, so they only warn.
 *
 * We publish no cloud node images yet, so the cloud defaults use all-zero values as placeholders: they have the right
 * shape and policy (which PCRs are enforced), and a user replaces them with the values of the image they run
 * (`constellation image build` writes them, docs/workflows/node-images.md); `config validate` and `create` refuse a
 * placeholder left in an enforced PCR that boot extends (lib/config/schema.ts). The local provider measures its node
 * image at `create` and adds PCRs 4, 9 and 11 then.
 */
import type { Measurements } from '../attestation/types.js';
import { variantSpec } from '../attestation/variant.js';
import type { AttestationVariant } from './variants.js';

export type { Measurement, Measurements } from '../attestation/types.js';

/** Largest PCR index of a TPM 2.0 PC client (24 PCRs). */
export const MAX_PCR_INDEX = 23;

const ZERO_SHA256 = '0'.repeat(64);

function pcrs(enforced: readonly number[], warnOnly: readonly number[]): Measurements {
  const out: Measurements = {};
  for (const index of [...enforced, ...warnOnly].sort((a, b) => a - b)) {
    out[String(index)] = { expected: ZERO_SHA256, warnOnly: warnOnly.includes(index) };
  }
  return out;
}

/** The variant table's PCR policy, with all-zero values. */
export function defaultMeasurements(variant: AttestationVariant): Measurements {
  const { enforced, warnOnly } = variantSpec(variant).measurements;
  return pcrs(enforced, warnOnly);
}
