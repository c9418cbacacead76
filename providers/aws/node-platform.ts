/**
 * The AWS node platform (docs/design.md#attestation, docs/design.md#nodes): an EC2 instance with NitroTPM at /dev/tpmrm0, its state disk at /dev/sdb
 * (the device the launch template maps), node metadata from IMDS and the EC2/ELB APIs.
 *   aws-sev-snp    the AK is a primary key from our template; the SNP report (configfs-tsm or /dev/sev-guest) has
 *                  REPORT_DATA = SHA-512(AK) and comes with the VLEK the host hands out; instanceInfo also carries
 *                  the instance identity document, which a join service resolves in EC2 (./instance-identity.ts).
 *   aws-nitro-tpm  instanceInfo is the instance identity document; join services look its image up in EC2.
 */
import { akReportData, snpInstanceFields } from '../../lib/attestation/cloud-evidence.js';
import { snpReport } from '../../lib/attestation/tee/index.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { cloudPlatformBase, jsonBytes, kdsDeps, teeOptions } from '../common/node-platform.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { ImdsClient } from './imds.js';
import { AwsNodeMetadata } from './metadata.js';
import type { AwsProviderOptions } from './options.js';

/** The launch template maps the state disk here; on Nitro instances udev links it to the NVMe device. */
export const AWS_STATE_DISK = '/dev/sdb';

export async function awsNodePlatform(options: NodePlatformOptions): Promise<NodePlatform> {
  const providerOptions = (options.providerOptions ?? {}) as AwsProviderOptions;
  const tee = teeOptions(options);
  const metadata = new AwsNodeMetadata(providerOptions);
  const base = cloudPlatformBase('aws', options, { metadata, stateDisk: AWS_STATE_DISK });
  const variant = base.variant;
  return {
    ...base,
    async issuer(tpm) {
      const imds = new ImdsClient(providerOptions.imdsEndpoint);
      if (variant === 'aws-sev-snp') {
        // The identity document names the instance, so a join service can tell a control plane from a worker.
        return new VtpmIssuer({
          variant,
          tpm,
          instanceInfo: async (ak) =>
            jsonBytes({
              ...snpInstanceFields(await snpReport(akReportData(ak), tee)),
              identity: await imds.dynamic('instance-identity/document'),
            }),
        });
      }
      return new VtpmIssuer({
        variant,
        tpm,
        instanceInfo: async () => new TextEncoder().encode(await imds.dynamic('instance-identity/document')),
      });
    },
    cloudController: async () => ({ cloud: 'aws' }),
    async validatorDeps() {
      const [{ awsImageLookup }, { awsInstanceIdentity }] = await Promise.all([
        import('./image-lookup.js'),
        import('./instance-identity.js'),
      ]);
      return {
        ...kdsDeps(base.nodeDir),
        awsDescribeImage: awsImageLookup(providerOptions),
        awsInstanceIdentity: awsInstanceIdentity(providerOptions, () => metadata.clusterUid()),
      };
    },
  };
}
