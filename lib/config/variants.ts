/**
 * Attestation variants: the CLI names (`aws-sev-snp`) users type, the config keys (`awsSEVSNP`) Constellation's
 * config uses under `attestation`, and which variants each provider's nodes can produce (the first is the default).
 * Data only, so that every part (config, providers, attestation) reads one table.
 */

export const PROVIDERS = ['local', 'aws', 'azure', 'gcp'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** CLI variant name -> config key under `attestation`. */
export const VARIANT_CONFIG_KEYS = {
  'local-vtpm': 'localVTPM',
  'aws-sev-snp': 'awsSEVSNP',
  'aws-nitro-tpm': 'awsNitroTPM',
  'azure-sev-snp': 'azureSEVSNP',
  'azure-tdx': 'azureTDX',
  'azure-trustedlaunch': 'azureTrustedLaunch',
  'gcp-sev-es': 'gcpSEVES',
  'gcp-sev-snp': 'gcpSEVSNP',
} as const;

export type AttestationVariant = keyof typeof VARIANT_CONFIG_KEYS;
export type VariantConfigKey = (typeof VARIANT_CONFIG_KEYS)[AttestationVariant];

export const ATTESTATION_VARIANTS = Object.keys(VARIANT_CONFIG_KEYS) as AttestationVariant[];
export const VARIANT_CONFIG_KEY_LIST = Object.values(VARIANT_CONFIG_KEYS) as VariantConfigKey[];

/** The variants each provider allows; the first is what `config generate` picks without -a. */
export const PROVIDER_VARIANTS: Record<Provider, readonly AttestationVariant[]> = {
  local: ['local-vtpm'],
  aws: ['aws-sev-snp', 'aws-nitro-tpm'],
  azure: ['azure-sev-snp', 'azure-tdx', 'azure-trustedlaunch'],
  gcp: ['gcp-sev-snp', 'gcp-sev-es'],
};

export function defaultVariantOf(provider: Provider): AttestationVariant {
  return PROVIDER_VARIANTS[provider][0];
}

export function isProvider(name: string): name is Provider {
  return (PROVIDERS as readonly string[]).includes(name);
}

export function isAttestationVariant(name: string): name is AttestationVariant {
  return Object.hasOwn(VARIANT_CONFIG_KEYS, name);
}

/** The config key of a CLI variant name. */
export function variantConfigKey(variant: AttestationVariant): VariantConfigKey {
  return VARIANT_CONFIG_KEYS[variant];
}

/** The CLI variant name of a config key, or undefined for an unknown key. */
export function variantOfConfigKey(key: string): AttestationVariant | undefined {
  return ATTESTATION_VARIANTS.find((v) => VARIANT_CONFIG_KEYS[v] === key);
}

/** The provider whose nodes produce a variant. */
export function providerOfVariant(variant: AttestationVariant): Provider {
  return PROVIDERS.find((p) => PROVIDER_VARIANTS[p].includes(variant))!;
}
