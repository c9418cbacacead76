/**
 * The AWS provider (ProviderModule): infrastructure through the official AWS SDK for JavaScript v3, node
 * metadata from the instance metadata service and the EC2/ELB APIs, IAM instance profiles for the nodes.
 * Everything that loads the SDK is imported on first use, so `constellation --help` never loads it.
 * Options: see ./options.ts (endpoints, static credentials, retry and polling delays, instrumentation).
 */
import { variantsOf } from '../../lib/attestation/variant.js';
import type { NodePlatformOptions, ProviderModule } from '../contract.js';
import type { AwsProviderOptions } from './options.js';

const provider = {
  name: 'aws',
  attestationVariants: variantsOf('aws'),
  async infrastructure(options?: AwsProviderOptions) {
    const { AwsInfrastructure } = await import('./infrastructure.js');
    return new AwsInfrastructure(options);
  },
  async nodePlatform(options: NodePlatformOptions) {
    const { awsNodePlatform } = await import('./node-platform.js');
    return awsNodePlatform(options);
  },
  /** aws-nitro-tpm: the EC2 image lookup (DescribeImages) through this provider's clients. */
  async attestationDeps(options?: AwsProviderOptions) {
    const { awsImageLookup } = await import('./image-lookup.js');
    return { awsDescribeImage: awsImageLookup(options) };
  },
  async iam(options?: AwsProviderOptions) {
    const { AwsIam } = await import('./iam.js');
    return new AwsIam(options);
  },
} satisfies ProviderModule;

export default provider;
