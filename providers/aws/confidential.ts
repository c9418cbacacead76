/**
 * The confidential-VM settings of docs/design.md#providers for AWS, per attestation variant (the variant table in
 * lib/attestation/variant-table.ts says which variants run on AWS and on which instance families):
 *  - SEV-SNP variants: `CpuOptions.AmdSevSnp = enabled` in the launch template;
 *  - every variant: an image with NitroTPM (`TpmSupport: v2.0`) that boots with UEFI (the vTPM measures the boot);
 *  - SEV-SNP runs only in the regions AWS offers it in (Amazon EC2 User Guide, "AMD SEV-SNP for Amazon EC2
 *    instances", Requirements: US East (Ohio) and Europe (Ireland)); create refuses any other before calling AWS.
 */
import { checkCvmInstanceType, requireVariantOn } from '../../lib/attestation/variant.js';
import { UserError } from '../../lib/errors.js';

export interface LaunchTemplateCpuSettings {
  CpuOptions?: { AmdSevSnp: 'enabled' };
}

/** Checks variant and instance type and returns what the launch template needs for them. */
export function confidentialSettings(
  variant: string,
  instanceType: string,
  nodeGroup: string,
): LaunchTemplateCpuSettings {
  const spec = requireVariantOn('aws', variant);
  checkCvmInstanceType(spec, instanceType, nodeGroup);
  return spec.cvm?.technology === 'sev-snp' ? { CpuOptions: { AmdSevSnp: 'enabled' } } : {};
}

/** Regions with SEV-SNP instances (see the header). */
export const SEV_SNP_REGIONS: readonly string[] = ['us-east-2', 'eu-west-1'];

/** Refuses a SEV-SNP variant in a region without SEV-SNP (the launch would fail only after the network was made). */
export function checkRegion(variant: string, region: string): void {
  const spec = requireVariantOn('aws', variant);
  if (spec.cvm?.technology === 'sev-snp' && !SEV_SNP_REGIONS.includes(region)) {
    throw new UserError(
      `AWS offers SEV-SNP instances (attestation variant ${variant}) only in ${SEV_SNP_REGIONS.join(' and ')}, not in ${region}.`,
      {
        hint: `Set provider.aws.region to ${SEV_SNP_REGIONS.join(' or ')} (and provider.aws.zone to one of its zones), or use the aws-nitro-tpm variant. Nothing was created.`,
      },
    );
  }
}

/** The image must boot with UEFI and expose NitroTPM 2.0, or the node cannot attest. */
export function checkImage(imageId: string, image: { BootMode?: string; TpmSupport?: string } | undefined): void {
  if (!image) {
    throw new UserError(`The image ${imageId} does not exist in this region or is not shared with this account.`, {
      hint: 'Check `image` in the config and provider.aws.region; node images are regional AMIs.',
    });
  }
  const problems: string[] = [];
  if (image.TpmSupport !== 'v2.0') problems.push(`TpmSupport is ${image.TpmSupport ?? 'unset'}, not v2.0`);
  if (image.BootMode !== 'uefi' && image.BootMode !== 'uefi-preferred')
    problems.push(`BootMode is ${image.BootMode ?? 'unset (legacy BIOS)'}, not uefi`);
  if (problems.length > 0) {
    throw new UserError(`The image ${imageId} cannot run a Constellation node: ${problems.join('; ')}.`, {
      hint: 'Use a Constellation node image for AWS: it is registered with NitroTPM 2.0 and UEFI boot.',
    });
  }
}
