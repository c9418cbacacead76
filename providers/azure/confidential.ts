/**
 * The confidential-VM settings of each Azure attestation variant (DESIGN §9) and the VM sizes that support
 * them: SEV-SNP CVMs are DCas_v5/ECas_v5 (and their local-disk "ads" siblings), TDX CVMs DCes_v5/ECes_v5;
 * trusted launch runs on ordinary sizes. A size that cannot run the variant is a UserError before anything is
 * created, since Azure would only refuse it after the network is already made.
 */
import { UserError } from '../../lib/errors.js';

export const AZURE_VARIANTS = ['azure-sev-snp', 'azure-tdx', 'azure-trustedlaunch'] as const;
export type AzureVariant = (typeof AZURE_VARIANTS)[number];

export interface SecuritySettings {
  securityType: 'ConfidentialVM' | 'TrustedLaunch';
  /** OS disk securityProfile.securityEncryptionType, confidential VMs only. */
  securityEncryptionType?: 'VMGuestStateOnly';
}

const SIZE_PATTERNS: Record<AzureVariant, RegExp | undefined> = {
  'azure-sev-snp': /^Standard_[DE]C\d+a(d)?s_v5$/i,
  'azure-tdx': /^Standard_[DE]C\d+e(d)?s_v5$/i,
  'azure-trustedlaunch': undefined,
};

const SIZE_EXAMPLES: Record<AzureVariant, string> = {
  'azure-sev-snp': 'Standard_DC4as_v5, Standard_EC4as_v5 (DCas_v5/ECas_v5 family)',
  'azure-tdx': 'Standard_DC4es_v5, Standard_EC4es_v5 (DCes_v5/ECes_v5 family)',
  'azure-trustedlaunch': 'any Gen2 size, e.g. Standard_D4s_v5',
};

export function isAzureVariant(variant: string): variant is AzureVariant {
  return (AZURE_VARIANTS as readonly string[]).includes(variant);
}

export function securitySettings(variant: string): SecuritySettings {
  if (!isAzureVariant(variant)) {
    throw new UserError(`Attestation variant "${variant}" does not run on Azure.`, {
      hint: `Use one of ${AZURE_VARIANTS.join(', ')} in the config's attestation section.`,
    });
  }
  return variant === 'azure-trustedlaunch'
    ? { securityType: 'TrustedLaunch' }
    : { securityType: 'ConfidentialVM', securityEncryptionType: 'VMGuestStateOnly' };
}

/** Throws a UserError naming the node group when its VM size cannot run the variant. */
export function assertInstanceType(variant: AzureVariant, nodeGroup: string, instanceType: string): void {
  const pattern = SIZE_PATTERNS[variant];
  if (pattern && !pattern.test(instanceType)) {
    throw new UserError(`nodeGroups.${nodeGroup}.instanceType "${instanceType}" cannot run ${variant} confidential VMs.`, {
      hint: `Use a size such as ${SIZE_EXAMPLES[variant]}; \`constellation config instance-types\` lists them.`,
    });
  }
}
