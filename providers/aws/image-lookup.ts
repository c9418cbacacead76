/**
 * The EC2 image lookup the aws-nitro-tpm validator needs (ValidatorDeps `awsDescribeImage`): DescribeImages in the
 * instance's region, through the provider's clients (default credential chain, or the options' endpoint and keys).
 * An unknown image id is "no such image" (undefined), not an error: the validator refuses it with that reason.
 */
import { DescribeImagesCommand, type DescribeImagesCommandOutput } from '@aws-sdk/client-ec2';
import type { AwsDescribeImage } from '../../lib/attestation/variants/aws-nitro-tpm.js';
import { AwsClients } from './clients.js';
import { awsErrorCode } from './errors.js';
import type { AwsProviderOptions } from './options.js';

export function awsImageLookup(options: AwsProviderOptions = {}): AwsDescribeImage {
  const clients = new AwsClients(options);
  return async ({ region, imageId }) => {
    let out: DescribeImagesCommandOutput;
    try {
      out = await clients.send<DescribeImagesCommandOutput>(
        clients.ec2(region),
        new DescribeImagesCommand({ ImageIds: [imageId] }),
        `Looking up image ${imageId}`,
      );
    } catch (err) {
      if (/^InvalidAMIID\./.test(awsErrorCode(err))) return undefined;
      throw err;
    }
    const image = out.Images?.find((i) => i.ImageId === imageId);
    return image && { tpmSupport: image.TpmSupport };
  };
}
