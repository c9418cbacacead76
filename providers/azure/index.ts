/**
 * The Azure provider (docs/design.md#providers): confidential VM scale sets (SEV-SNP, TDX) or trusted-launch VMs behind a
 * standard load balancer, made with the official Azure SDKs. This module only wires the parts together; each
 * part is imported when first used so that loading the provider does not load an SDK.
 */
import { variantsOf } from '../../lib/attestation/variant.js';
import type { ProviderModule } from '../contract.js';
import { parseAzureOptions } from './options.js';

const azure: ProviderModule = {
  name: 'azure',
  attestationVariants: variantsOf('azure'),
  async infrastructure(options) {
    const { AzureInfrastructure } = await import('./infrastructure.js');
    return new AzureInfrastructure(parseAzureOptions(options));
  },
  async nodePlatform(options) {
    const { azureNodePlatform } = await import('./node-platform.js');
    return azureNodePlatform(options);
  },
  async iam(options) {
    const { AzureIam } = await import('./iam.js');
    return new AzureIam(parseAzureOptions(options));
  },
};

export default azure;
