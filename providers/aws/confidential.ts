/**
 * The confidential-VM settings of DESIGN §9 for AWS, per attestation variant:
 *  - aws-sev-snp: `CpuOptions.AmdSevSnp = enabled` in the launch template, on the m6a/c6a/r6a families;
 *  - both variants: an image with NitroTPM (`TpmSupport: v2.0`) that boots with UEFI (the vTPM measures the boot).
 */
import { UserError } from '../../lib/errors.js';

export const AWS_VARIANTS = ['aws-sev-snp', 'aws-nitro-tpm'] as const;

const SNP_FAMILIES = ['m6a', 'c6a', 'r6a'];

export interface LaunchTemplateCpuSettings {
  CpuOptions?: { AmdSevSnp: 'enabled' };
}

/** Checks variant and instance type and returns what the launch template needs for them. */
export function confidentialSettings(variant: string, instanceType: string, nodeGroup: string): LaunchTemplateCpuSettings {
  if (!(AWS_VARIANTS as readonly string[]).includes(variant)) {
    throw new UserError(`The attestation variant "${variant}" does not run on AWS.`, {
      hint: `Use one of ${AWS_VARIANTS.join(', ')} under attestation in the config.`,
    });
  }
  if (variant !== 'aws-sev-snp') return {};
  const family = instanceType.split('.')[0];
  if (!SNP_FAMILIES.includes(family)) {
    throw new UserError(`nodeGroups.${nodeGroup}.instanceType "${instanceType}" cannot run AMD SEV-SNP on AWS.`, {
      hint: `AWS offers SEV-SNP on the ${SNP_FAMILIES.join(', ')} families, e.g. m6a.xlarge; \`constellation config instance-types\` lists them.`,
    });
  }
  return { CpuOptions: { AmdSevSnp: 'enabled' } };
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
