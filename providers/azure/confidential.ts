/**
 * The confidential-VM settings of each Azure attestation variant (docs/design.md#providers). The variant table
 * (lib/attestation/variant-table.ts) says which variants run on Azure and on which VM sizes: SEV-SNP CVMs are
 * DCas_v5/ECas_v5 (and their local-disk "ads" siblings), TDX CVMs DCes_v5/ECes_v5; trusted launch runs on
 * ordinary sizes. A size that cannot run the variant is a UserError before anything is created, since Azure would
 * only refuse it after the network is already made.
 */
import { checkCvmInstanceType, requireVariantOn } from '../../lib/attestation/variant.js';

export interface SecuritySettings {
  securityType: 'ConfidentialVM' | 'TrustedLaunch';
  /** OS disk securityProfile.securityEncryptionType, confidential VMs only. */
  securityEncryptionType?: 'VMGuestStateOnly';
}

/** Confidential VMs for CVM variants, trusted launch (vTPM, secure boot) for the others. */
export function securitySettings(variant: string): SecuritySettings {
  return requireVariantOn('azure', variant).cvm
    ? { securityType: 'ConfidentialVM', securityEncryptionType: 'VMGuestStateOnly' }
    : { securityType: 'TrustedLaunch' };
}

/** Throws a UserError naming the node group when its VM size cannot run the variant. */
export function assertInstanceType(variant: string, nodeGroup: string, instanceType: string): void {
  checkCvmInstanceType(requireVariantOn('azure', variant), instanceType, nodeGroup);
}
