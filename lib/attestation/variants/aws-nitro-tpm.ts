/**
 * aws-nitro-tpm: AWS EC2 with NitroTPM (not a confidential VM). AWS certifies no attestation key, so the AK is
 * taken as the instance presents it; what is checked instead is that the instance's image, looked up through the
 * injected EC2 client (`deps.awsDescribeImage`), is registered with TPM 2.0 support. The vTPM quote then proves
 * the PCRs. This variant protects against a wrong image, not against a malicious host.
 *
 * instanceInfo (base64 JSON): the EC2 instance identity document ({ region, imageId, instanceId, ... }).
 */
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import { akKey, readInstanceInfo, type AkTrust, type CloudDeps } from './cloud-common.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'aws-nitro-tpm';

export const instanceInfoSchema = z.looseObject({
  region: z.string().min(1),
  imageId: z.string().min(1),
  instanceId: z.string().optional(),
});
export type AwsNitroTpmInstanceInfo = z.infer<typeof instanceInfoSchema>;

/** What EC2's DescribeImages says about an image (undefined: no such image). */
export type AwsDescribeImage = (input: {
  region: string;
  imageId: string;
}) => Promise<{ tpmSupport?: string } | undefined>;

export function awsNitroTpmTrust(_config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    akKey(VARIANT, akPublic);
    const describe = deps.awsDescribeImage as AwsDescribeImage | undefined;
    if (!describe)
      throw new AttestationError(`${VARIANT}: no EC2 client is configured to look up the instance's image`);
    let image: { tpmSupport?: string } | undefined;
    try {
      image = await describe({ region: info.region, imageId: info.imageId });
    } catch (cause) {
      throw new AttestationError(
        `${VARIANT}: looking up image ${info.imageId} in ${info.region} failed: ${(cause as Error)?.message ?? String(cause)}`,
        undefined,
        { cause },
      );
    }
    if (!image) throw new AttestationError(`${VARIANT}: image ${info.imageId} does not exist in ${info.region}`);
    if (image.tpmSupport !== 'v2.0')
      throw new AttestationError(
        `${VARIANT}: image ${info.imageId} is not registered with NitroTPM support (TpmSupport v2.0)`,
      );
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, awsNitroTpmTrust(config, deps));
}
