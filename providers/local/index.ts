/**
 * The local provider (docs/design.md#providers): a cluster of process nodes on this machine, each with its own software TPM,
 * state directory and network namespace (with an address no other local user can take), behind a local metadata server and TCP load balancer.
 * Nodes produce the local-vtpm attestation variant. Implementation modules load on first use, so loading the
 * provider costs nothing until it is used.
 */
import { variantsOf } from '../../lib/attestation/variant.js';
import type { ProviderModule } from '../contract.js';
import type { LocalInfrastructureOptions } from './infrastructure.js';

const provider: ProviderModule = {
  name: 'local',
  attestationVariants: variantsOf('local'),
  async infrastructure(options?: Record<string, unknown>) {
    const { LocalInfrastructure } = await import('./infrastructure.js');
    return new LocalInfrastructure(options as LocalInfrastructureOptions | undefined);
  },
  async nodePlatform(options) {
    const { localNodePlatform } = await import('./node-platform.js');
    return localNodePlatform(options);
  },
  /**
   * The AK registry of the cluster's metadata server: local-vtpm trusts only the AKs registered there. Its URL comes
   * from the cluster's state (metadataUrl); without a state (`verify -e <node> --cluster-id …` in a workspace that
   * holds only the config) it is the metadata server of the node's address range (options.nodeAddress).
   */
  async attestationDeps(options?: Record<string, unknown>) {
    const [{ localAkRegistry }, { metadataUrlOfNode }] = await Promise.all([
      import('./node-metadata.js'),
      import('./layout.js'),
    ]);
    const nodeAddress = options?.nodeAddress as string | undefined;
    const metadataUrl =
      (options?.metadataUrl as string | undefined) ??
      process.env.METADATA_URL ??
      (nodeAddress ? metadataUrlOfNode(nodeAddress) : undefined);
    if (!metadataUrl) {
      const { UserError } = await import('../../lib/errors.js');
      throw new UserError(
        "This workspace has no local cluster, so there is no metadata server to ask for the nodes' attestation keys.",
        {
          hint: "Name the node with -e <address> (its cluster's metadata server is then asked), or run the command in the workspace of the cluster (-C <dir>).",
        },
      );
    }
    return { akRegistry: localAkRegistry(metadataUrl, { localAddress: options?.localAddress as string | undefined }) };
  },
};

export default provider;
export type { LocalInfrastructure, LocalInfrastructureOptions } from './infrastructure.js';
