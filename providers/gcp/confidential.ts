/**
 * The confidential-VM settings of GCP (docs/design.md#providers) per attestation variant: SEV-SNP on n2d (AMD Milan or
 * newer), SEV-ES on n2d and c2d (the variant table in lib/attestation/variant-table.ts holds the families);
 * always a shielded VM with vTPM and integrity monitoring, and host maintenance that terminates (live migration
 * is not available for these VMs).
 * No SDK import here: loaded with the provider's index.
 */
import { checkCvmInstanceType, requireVariantOn } from '../../lib/attestation/variant.js';

/** The instance-template properties that make a VM confidential, for a variant. */
export interface ConfidentialSettings {
  confidentialInstanceConfig: { confidentialInstanceType: 'SEV' | 'SEV_SNP'; enableConfidentialCompute: boolean };
  shieldedInstanceConfig: { enableVtpm: boolean; enableIntegrityMonitoring: boolean; enableSecureBoot: boolean };
  scheduling: { onHostMaintenance: 'TERMINATE'; automaticRestart: boolean };
  minCpuPlatform?: string;
}

/** Checks that the variant is a GCP one and the machine type can run it; a UserError naming the fix otherwise. */
export function checkMachineType(variant: string, machineType: string, nodeGroup: string): void {
  checkCvmInstanceType(requireVariantOn('gcp', variant), machineType, nodeGroup);
}

export function confidentialSettings(variant: string): ConfidentialSettings {
  const { cvm } = requireVariantOn('gcp', variant);
  // GCP runs Constellation's nodes only as confidential VMs: a GCP row of the variant table names its technology.
  if (!cvm) throw new Error(`variant table: GCP variant ${variant} has no CVM technology`);
  const snp = cvm.technology === 'sev-snp';
  return {
    confidentialInstanceConfig: { confidentialInstanceType: snp ? 'SEV_SNP' : 'SEV', enableConfidentialCompute: true },
    shieldedInstanceConfig: { enableVtpm: true, enableIntegrityMonitoring: true, enableSecureBoot: false },
    scheduling: { onHostMaintenance: 'TERMINATE', automaticRestart: true },
    // SEV-SNP needs 3rd-generation EPYC (Milan) hosts.
    ...(snp ? { minCpuPlatform: 'AMD Milan' } : {}),
  };
}
