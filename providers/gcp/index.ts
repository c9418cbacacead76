/**
 * The GCP provider (ProviderModule): confidential VMs (SEV-SNP, SEV-ES) in managed instance groups behind a
 * regional network load balancer, made with the official @google-cloud/compute SDK; node metadata from the
 * GCE metadata server and the Compute API; service accounts, a custom role and a key for `iam create gcp`;
 * the shielded-VM identity lookup the gcp-sev-* validators need. Every part that loads the SDK is imported
 * on first use, so `constellation --help` never loads it. Options: ./options.ts.
 */
import { variantsOf } from '../../lib/attestation/variant.js';
import type { ProviderModule } from '../contract.js';
import type { GcpProviderOptions } from './options.js';

const provider: ProviderModule = {
  name: 'gcp',
  attestationVariants: variantsOf('gcp'),
  async infrastructure(options) {
    const { GcpInfrastructure } = await import('./infrastructure.js');
    return new GcpInfrastructure(options as GcpProviderOptions | undefined);
  },
  async nodePlatform(options) {
    const { gcpNodePlatform } = await import('./node-platform.js');
    return gcpNodePlatform(options);
  },
  async iam(options) {
    const { GcpIam } = await import('./iam.js');
    return new GcpIam(options as GcpProviderOptions | undefined);
  },
  /** The shielded-VM identity lookup; with options.verifier (`attestation verify`) as the user, see verifierOptions. */
  async attestationDeps(options) {
    const { shieldedIdentityClient, verifierOptions } = await import('./shielded-identity.js');
    return {
      gcpShieldedIdentity: shieldedIdentityClient(
        options?.verifier ? verifierOptions() : (options as GcpProviderOptions | undefined),
      ),
    };
  },
};

export default provider;
