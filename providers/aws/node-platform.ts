/**
 * The AWS node platform (DESIGN §5, §7): an EC2 instance with NitroTPM at /dev/tpmrm0, its state disk at /dev/sdb
 * (the device the launch template maps), node metadata from IMDS and the EC2/ELB APIs.
 *   aws-sev-snp    the AK is a primary key from our template; the SNP report (configfs-tsm or /dev/sev-guest) has
 *                  REPORT_DATA = SHA-512(AK) and comes with the VLEK the host hands out.
 *   aws-nitro-tpm  instanceInfo is the instance identity document; join services look its image up in EC2.
 */
import { akReportData, snpInstanceFields } from '../../lib/attestation/cloud-evidence.js';
import { snpReport } from '../../lib/attestation/tee/index.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { UserError } from '../../lib/errors.js';
import { CLOUD_NODE_DIR, CLOUD_STATE_DIR, CLOUD_TPM_DEVICE, cloudIdentity, jsonBytes, kdsDeps, teeOptions } from '../common/node-platform.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { ImdsClient } from './imds.js';
import { AwsNodeMetadata } from './metadata.js';
import type { AwsProviderOptions } from './options.js';

/** The launch template maps the state disk here; on Nitro instances udev links it to the NVMe device. */
export const AWS_STATE_DISK = '/dev/sdb';

export async function awsNodePlatform(options: NodePlatformOptions): Promise<NodePlatform> {
  const providerOptions = (options.providerOptions ?? {}) as AwsProviderOptions;
  const metadata = new AwsNodeMetadata(providerOptions);
  const tee = teeOptions(options);
  const nodeDir = options.paths?.nodeDir ?? CLOUD_NODE_DIR;
  const variant = options.variant;
  if (variant !== 'aws-sev-snp' && variant !== 'aws-nitro-tpm') throw new UserError(`AWS nodes attest as aws-sev-snp or aws-nitro-tpm, not ${variant}.`);
  return {
    provider: 'aws',
    variant,
    metadata,
    identity: cloudIdentity('aws', metadata),
    tpmPath: options.paths?.tpm ?? CLOUD_TPM_DEVICE,
    async issuer(tpm) {
      if (variant === 'aws-sev-snp') {
        return new VtpmIssuer({ variant, tpm, instanceInfo: async (ak) => jsonBytes(snpInstanceFields(await snpReport(akReportData(ak), tee))) });
      }
      const imds = new ImdsClient(providerOptions.imdsEndpoint);
      return new VtpmIssuer({ variant, tpm, instanceInfo: async () => new TextEncoder().encode(await imds.dynamic('instance-identity/document')) });
    },
    stateDisk: { kind: 'luks', device: options.paths?.stateDisk ?? AWS_STATE_DISK, mountPoint: options.paths?.stateDir ?? CLOUD_STATE_DIR },
    nodeDir,
    kubernetesBackend: 'kubeadm',
    imageVersion: options.imageVersion ?? 'unknown',
    async validatorDeps() {
      const { awsImageLookup } = await import('./image-lookup.js');
      return { ...kdsDeps(nodeDir), awsDescribeImage: awsImageLookup(providerOptions) };
    },
  };
}
