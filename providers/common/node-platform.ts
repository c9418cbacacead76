/**
 * What the cloud providers' node platforms share: where a cloud VM keeps its TPM and the node's folder, how the
 * node's identity doubles as the check that the metadata service of the named cloud answers, the TEE report
 * options from the boot config's paths, and the KDS fetcher (with its cache in the node's folder) for join
 * services that verify SEV-SNP reports without a VCEK.
 */
import path from 'node:path';
import { kdsFetcher } from '../../lib/attestation/snp/kds-fetcher.js';
import type { TeeReportOptions } from '../../lib/attestation/tee/index.js';
import type { ValidatorDeps } from '../../lib/attestation/types.js';
import { variantsOf } from '../../lib/attestation/variant.js';
import { UserError } from '../../lib/errors.js';
import type { NodeMetadata, NodePlatform, NodePlatformOptions, NodeRole } from '../contract.js';

export const CLOUD_TPM_DEVICE = '/dev/tpmrm0';
export const CLOUD_NODE_DIR = '/var/lib/constellation';
/** Where the LUKS2 state disk is mounted (upstream's path). */
export const CLOUD_STATE_DIR = '/var/run/state';

/** The node's identity from its cloud's metadata; a failure says the boot config names a cloud that does not answer. */
export function cloudIdentity(
  cloud: string,
  metadata: NodeMetadata,
): () => Promise<{ name: string; ip: string; role: NodeRole }> {
  return async () => {
    let self;
    try {
      self = await metadata.self();
    } catch (err) {
      throw new UserError(
        `The boot config says this node runs on ${cloud}, but ${cloud}'s metadata service does not confirm it: ${(err as Error).message}`,
        {
          hint: "Check constellation.csp on the kernel command line (or the image's boot config), and the VM's access to its metadata service.",
          cause: err,
        },
      );
    }
    if (!self.vpcIp) throw new UserError(`${cloud}'s metadata service names no private IP address for this node.`);
    return { name: self.name, ip: self.vpcIp, role: self.role };
  };
}

/** The TEE options of a platform: the boot config's paths over the given (or the kernel's) interfaces. */
export function teeOptions(options: NodePlatformOptions): TeeReportOptions {
  const { paths, tee } = options;
  return {
    tsm: { ...tee?.tsm, ...(paths?.tsmRoot ? { root: paths.tsmRoot } : {}) },
    sevGuest: { ...tee?.sevGuest, ...(paths?.sevGuest ? { path: paths.sevGuest } : {}) },
  };
}

/** The KDS fetcher for a node's join service, caching in the node's folder. */
export function kdsDeps(nodeDir: string): Partial<ValidatorDeps> {
  return { fetch: kdsFetcher({ cacheDir: path.join(nodeDir, 'kds-cache') }) };
}

/** JSON bytes of an instanceInfo object. */
export function jsonBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(value));
}

/**
 * What every cloud node platform has the same way: the variant (checked against the cloud's in the variant table,
 * lib/attestation/variant-table.ts), its metadata as the
 * node's identity, the TPM device, the LUKS2 state disk at `stateDisk` (or the boot config's path) mounted at
 * /var/run/state, the node's folder, kubeadm and the image version. The platform adds its issuer and validator deps.
 */
export function cloudPlatformBase(
  cloud: string,
  options: NodePlatformOptions,
  settings: { metadata: NodeMetadata; stateDisk: string },
): Omit<NodePlatform, 'issuer' | 'validatorDeps'> {
  const variants: readonly string[] = variantsOf(cloud);
  if (!variants.includes(options.variant)) {
    throw new UserError(`${cloud} nodes attest as ${variants.join(' or ')}, not ${options.variant}.`);
  }
  return {
    provider: cloud,
    variant: options.variant,
    metadata: settings.metadata,
    identity: cloudIdentity(cloud, settings.metadata),
    tpmPath: options.paths?.tpm ?? CLOUD_TPM_DEVICE,
    stateDisk: {
      kind: 'luks',
      device: options.paths?.stateDisk ?? settings.stateDisk,
      mountPoint: options.paths?.stateDir ?? CLOUD_STATE_DIR,
    },
    nodeDir: options.paths?.nodeDir ?? CLOUD_NODE_DIR,
    kubernetesBackend: 'kubeadm',
    imageVersion: options.imageVersion ?? 'unknown',
  };
}
