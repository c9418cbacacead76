/**
 * The qemu provider (`mini up --vm`, docs/workflows/mini.md#vm-nodes-mini-up---vm): a cluster of QEMU VMs on this machine, each
 * booting the node image under UEFI firmware (OVMF) with swtpm as its TPM, a LUKS2 state disk that the guest
 * encrypts, and a tap device in its own network namespace; the same network, metadata server, load balancer, cluster
 * record and process ownership as the local provider (providers/local/), whose nodes are processes instead.
 * Nodes attest as qemu-vtpm. Implementation modules load on first use.
 */
import { variantsOf } from '../../lib/attestation/variant.js';
import type { ProviderModule } from '../contract.js';
import type { QemuInfrastructureOptions } from './infrastructure.js';

const provider: ProviderModule = {
  name: 'qemu',
  attestationVariants: variantsOf('qemu'),
  async infrastructure(options?: Record<string, unknown>) {
    const { QemuInfrastructure } = await import('./infrastructure.js');
    return new QemuInfrastructure(options as QemuInfrastructureOptions | undefined);
  },
  async nodePlatform(options) {
    const { qemuNodePlatform } = await import('./node-platform.js');
    return qemuNodePlatform(options);
  },
  /** The AK registry of the cluster's metadata server, found as for a local cluster. */
  async attestationDeps(options?: Record<string, unknown>) {
    const { default: local } = await import('../local/index.js');
    return local.attestationDeps!(options);
  },
};

export default provider;
