/**
 * The confidential-VM settings of docs/design.md#providers for AWS, per attestation variant (the variant table in
 * lib/attestation/variant-table.ts says which variants run on AWS and on which instance families):
 *  - SEV-SNP variants: `CpuOptions.AmdSevSnp = enabled` in the launch template;
 *  - every variant: an image with NitroTPM (`TpmSupport: v2.0`) that boots with UEFI (the vTPM measures the boot).
 */
import { checkCvmInstanceType, requireVariantOn } from '../../lib/attestation/variant.js';
import { UserError } from '../../lib/errors.js';

export interface LaunchTemplateCpuSettings {
  CpuOptions?: { AmdSevSnp: 'enabled' };
}

/** Checks variant and instance type and returns what the launch template needs for them. */
export function confidentialSettings(variant: string, instanceType: string, nodeGroup: string): LaunchTemplateCpuSettings {
  const spec = requireVariantOn('aws', variant);
  checkCvmInstanceType(spec, instanceType, nodeGroup);
  return spec.cvm?.technology === 'sev-snp' ? { CpuOptions: { AmdSevSnp: 'enabled' } } : {};
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
  if (image.BootMode !== 'uefi' && image.BootMode !== 'uefi-preferred') problems.push(`BootMode is ${image.BootMode ?? 'unset (legacy BIOS)'}, not uefi`);
  if (problems.length > 0) {
    throw new UserError(`The image ${imageId} cannot run a Constellation node: ${problems.join('; ')}.`, {
      hint: 'Use a Constellation node image for AWS: it is registered with NitroTPM 2.0 and UEFI boot.',
    });
  }
}
