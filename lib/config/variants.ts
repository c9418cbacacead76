/**
 * The config's view of the attestation variants: the CLI names (`aws-sev-snp`) users type, the config keys
 * (`awsSEVSNP`) Constellation's config uses under `attestation`, and which variants each provider's nodes can
 * produce (the first is the default). All derived from the one variant table (lib/attestation/variant-table.ts).
 */
import type { VariantConfigKey, VariantName } from '../attestation/variant-table.js';
import { KNOWN_VARIANTS, VARIANTS, variantsOf, type Provider } from '../attestation/variant.js';

export {
  PROVIDERS,
  defaultVariantOf,
  isKnownVariant as isAttestationVariant,
  isProvider,
  providerOfVariant,
  type Provider,
} from '../attestation/variant.js';
export type { VariantConfigKey } from '../attestation/variant-table.js';

export type AttestationVariant = VariantName;

/** CLI variant name -> config key under `attestation`. */
export const VARIANT_CONFIG_KEYS = Object.fromEntries(VARIANTS.map((v) => [v.name, v.configKey])) as Record<
  AttestationVariant,
  VariantConfigKey
>;

export const ATTESTATION_VARIANTS: AttestationVariant[] = [...KNOWN_VARIANTS];
export const VARIANT_CONFIG_KEY_LIST = VARIANTS.map((v) => v.configKey) as VariantConfigKey[];

/** The variants each provider allows; the first is what `config generate` picks without -a. */
export const PROVIDER_VARIANTS: Record<Provider, readonly AttestationVariant[]> = {
  local: variantsOf('local'),
  qemu: variantsOf('qemu'),
  aws: variantsOf('aws'),
  azure: variantsOf('azure'),
  gcp: variantsOf('gcp'),
};

/** The config key of a CLI variant name. */
export function variantConfigKey(variant: AttestationVariant): VariantConfigKey {
  return VARIANT_CONFIG_KEYS[variant];
}

/** The CLI variant name of a config key, or undefined for an unknown key. */
export function variantOfConfigKey(key: string): AttestationVariant | undefined {
  return ATTESTATION_VARIANTS.find((v) => VARIANT_CONFIG_KEYS[v] === key);
}
