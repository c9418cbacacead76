/**
 * Validators by variant name. Each variant lives in `variants/<variant>.ts` and is imported on first use,
 * so a process loads only the verifier (and the certificates) of the variant it needs.
 */
import { UserError } from '../errors.js';
import type { Validator, ValidatorDeps, VariantConfig } from './types.js';

export const KNOWN_VARIANTS = [
  'local-vtpm',
  'aws-sev-snp',
  'aws-nitro-tpm',
  'azure-sev-snp',
  'azure-tdx',
  'azure-trustedlaunch',
  'gcp-sev-es',
  'gcp-sev-snp',
] as const;

export type VariantName = (typeof KNOWN_VARIANTS)[number];

export function isKnownVariant(variant: string): variant is VariantName {
  return (KNOWN_VARIANTS as readonly string[]).includes(variant);
}

export async function createValidator(variant: string, config: VariantConfig, deps: ValidatorDeps = {}): Promise<Validator> {
  if (!isKnownVariant(variant)) {
    throw new UserError(`Unknown attestation variant "${variant}"`, { hint: `Known variants: ${KNOWN_VARIANTS.join(', ')}.` });
  }
  const mod = (await import(`./variants/${variant}.js`)) as { createValidator: (config: VariantConfig, deps: ValidatorDeps) => Validator };
  return mod.createValidator(config, deps);
}
