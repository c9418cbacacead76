/**
 * Validators by variant name: the variant table's row names the module in `variants/<variant>.ts`, imported on
 * first use, so a process loads only the verifier (and the certificates) of the variant it needs.
 */
import { UserError } from '../errors.js';
import type { Validator, ValidatorDeps, VariantConfig } from './types.js';
import { findVariant, KNOWN_VARIANTS } from './variant.js';

export { KNOWN_VARIANTS, isKnownVariant, type VariantName } from './variant.js';

export async function createValidator(
  variant: string,
  config: VariantConfig,
  deps: ValidatorDeps = {},
): Promise<Validator> {
  const spec = findVariant(variant);
  if (!spec) {
    throw new UserError(`Unknown attestation variant "${variant}"`, {
      hint: `Known variants: ${KNOWN_VARIANTS.join(', ')}.`,
    });
  }
  return (await spec.validator()).createValidator(config, deps);
}
