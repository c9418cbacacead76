/**
 * Lookups over the variant table (./variant-table.ts): which variants exist, which a provider's nodes produce
 * (its default first), and the checks every provider makes before it creates a node: does the variant run on
 * this provider, and can the instance type run the variant's confidential VM. One wording for each refusal.
 */
import { UserError } from '../errors.js';
import { PROVIDERS, VARIANT_TABLE, type Provider, type VariantName, type VariantSpec } from './variant-table.js';

export { PROVIDERS, type Provider, type VariantName, type VariantSpec } from './variant-table.js';

/** The table's rows, typed as specs (optional columns readable on every row). */
export const VARIANTS: readonly VariantSpec[] = VARIANT_TABLE;

/** Every variant's name, in table order. */
export const KNOWN_VARIANTS: readonly VariantName[] = VARIANTS.map((v) => v.name as VariantName);

export function isKnownVariant(name: string): name is VariantName {
  return VARIANTS.some((v) => v.name === name);
}

export function isProvider(name: string): name is Provider {
  return (PROVIDERS as readonly string[]).includes(name);
}

/** The row of a variant, or undefined for an unknown name. */
export function findVariant(name: string): VariantSpec | undefined {
  return VARIANTS.find((v) => v.name === name);
}

/** The row of a known variant. */
export function variantSpec(name: VariantName): VariantSpec {
  return findVariant(name)!;
}

/** The variants a provider's nodes produce: the default first, then the table's order. */
export function variantsOf(provider: string): VariantName[] {
  const rows = VARIANTS.filter((v) => v.provider === provider);
  return [...rows.filter((v) => v.isDefault), ...rows.filter((v) => !v.isDefault)].map((v) => v.name as VariantName);
}

/** What `config generate` picks without -a. */
export function defaultVariantOf(provider: Provider): VariantName {
  return variantsOf(provider)[0]!;
}

/** The provider whose nodes produce a variant. */
export function providerOfVariant(variant: VariantName): Provider {
  return variantSpec(variant).provider;
}

const PROVIDER_TITLES: Record<Provider, string> = {
  local: 'the local provider',
  qemu: 'the qemu provider',
  aws: 'AWS',
  azure: 'Azure',
  gcp: 'GCP',
};

/** The row of `variant` when it runs on `provider`; a UserError naming the provider's variants otherwise. */
export function requireVariantOn(provider: Provider, variant: string): VariantSpec {
  const spec = findVariant(variant);
  if (spec?.provider !== provider) {
    throw new UserError(`The attestation variant "${variant}" does not run on ${PROVIDER_TITLES[provider]}.`, {
      hint: `Use one of ${variantsOf(provider).join(', ')} under attestation in the config.`,
    });
  }
  return spec;
}

/**
 * The instance family of a provider's instance type, as the table's `cvm.families` name them: AWS m6a.xlarge →
 * m6a, GCP n2d-standard-4 → n2d, Azure Standard_DC4ads_v5 → DCads_v5 (Azure's names are case-insensitive).
 */
export function instanceFamily(provider: Provider, instanceType: string): string {
  switch (provider) {
    case 'aws':
      return instanceType.split('.')[0]!;
    case 'gcp':
      return instanceType.split('-')[0]!;
    case 'azure': {
      const size = /^Standard_([A-Z]+)\d+([A-Z]*_v\d+)$/i.exec(instanceType);
      return size ? `${size[1]!.toUpperCase()}${size[2]!.toLowerCase()}` : '';
    }
    case 'local':
    case 'qemu':
      return instanceType;
  }
}

/**
 * Throws a UserError naming the node group when its instance type cannot run the variant's confidential VM.
 * Variants that are no CVM run on any type the cloud accepts: the config's instance-type list is the rule there.
 */
export function checkCvmInstanceType(spec: VariantSpec, instanceType: string, nodeGroup: string): void {
  if (!spec.cvm || spec.cvm.families.includes(instanceFamily(spec.provider, instanceType))) return;
  throw new UserError(
    `nodeGroups.${nodeGroup}.instanceType "${instanceType}" cannot run ${spec.name} confidential VMs.`,
    {
      hint: `${spec.name} runs on the ${spec.cvm.families.join(', ')} families, e.g. ${spec.defaultInstanceType}; \`constellation config instance-types\` lists them.`,
    },
  );
}
