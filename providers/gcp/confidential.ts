/**
 * The confidential-VM settings of GCP (DESIGN §9) per attestation variant: SEV-SNP on n2d (AMD Milan or
 * newer), SEV-ES on n2d and c2d; always a shielded VM with vTPM and integrity monitoring, and host
 * maintenance that terminates (live migration is not available for these VMs).
 * No SDK import here: loaded with the provider's index.
 */
import { UserError } from '../../lib/errors.js';

export const GCP_VARIANTS = ['gcp-sev-snp', 'gcp-sev-es'] as const;
export type GcpVariant = (typeof GCP_VARIANTS)[number];

const FAMILIES: Record<GcpVariant, readonly string[]> = {
  'gcp-sev-snp': ['n2d'],
  'gcp-sev-es': ['n2d', 'c2d'],
};

/** The instance-template properties that make a VM confidential, for a variant. */
export interface ConfidentialSettings {
  confidentialInstanceConfig: { confidentialInstanceType: 'SEV' | 'SEV_SNP'; enableConfidentialCompute: boolean };
  shieldedInstanceConfig: { enableVtpm: boolean; enableIntegrityMonitoring: boolean; enableSecureBoot: boolean };
  scheduling: { onHostMaintenance: 'TERMINATE'; automaticRestart: boolean };
  minCpuPlatform?: string;
}

export function isGcpVariant(variant: string): variant is GcpVariant {
  return (GCP_VARIANTS as readonly string[]).includes(variant);
}

/** Checks that the variant is a GCP one and the machine type can run it; a UserError naming the fix otherwise. */
export function checkMachineType(variant: string, machineType: string, nodeGroup: string): void {
  if (!isGcpVariant(variant)) {
    throw new UserError(`The attestation variant ${variant} does not run on GCP.`, {
      hint: `Use one of ${GCP_VARIANTS.join(', ')} in the config's attestation section.`,
    });
  }
  const family = machineType.split('-')[0] ?? '';
  if (!FAMILIES[variant].includes(family)) {
    throw new UserError(`nodeGroups.${nodeGroup}.instanceType ${machineType} cannot run ${variant} confidential VMs.`, {
      hint: `Use a ${FAMILIES[variant].join(' or ')} machine type (e.g. n2d-standard-4); \`constellation config instance-types\` lists them.`,
    });
  }
}

export function confidentialSettings(variant: GcpVariant): ConfidentialSettings {
  const snp = variant === 'gcp-sev-snp';
  return {
    confidentialInstanceConfig: { confidentialInstanceType: snp ? 'SEV_SNP' : 'SEV', enableConfidentialCompute: true },
    shieldedInstanceConfig: { enableVtpm: true, enableIntegrityMonitoring: true, enableSecureBoot: false },
    scheduling: { onHostMaintenance: 'TERMINATE', automaticRestart: true },
    // SEV-SNP needs 3rd-generation EPYC (Milan) hosts.
    ...(snp ? { minCpuPlatform: 'AMD Milan' } : {}),
  };
}
