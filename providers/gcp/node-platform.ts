/**
 * The GCP node platform (docs/design.md#attestation, docs/design.md#nodes): a GCE confidential VM with its shielded vTPM at /dev/tpmrm0, its state disk
 * at /dev/disk/by-id/google-state-disk (the device name the instance template gives it), node metadata from the GCE
 * metadata server and the Compute API. The AK is the one GCE's shielded identity vouches for: the primary key made
 * from the RSA template GCE keeps in its vTPM's NV index 0x01c10001. instanceInfo names the instance (project,
 * zone, name) and, for gcp-sev-snp, carries the SNP report whose REPORT_DATA is SHA-512(AK). A join service on
 * this node names the attested instance through Compute (./instance-identity.ts), for control-plane tickets.
 */
import { akReportData, GCE_AK_TEMPLATE_INDEX_RSA, snpInstanceFields } from '../../lib/attestation/cloud-evidence.js';
import { snpReport } from '../../lib/attestation/tee/index.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { UserError } from '../../lib/errors.js';
import { TpmError } from '../../lib/tpm/client.js';
import { cloudPlatformBase, jsonBytes, kdsDeps, teeOptions } from '../common/node-platform.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { GcpNodeMetadata } from './metadata.js';
import type { GcpProviderOptions } from './options.js';

export const GCP_STATE_DISK = '/dev/disk/by-id/google-state-disk';

/** gce://<project>/<zone>/<name> → the instance as the gcp-* variants name it. */
export function gceInstanceOf(providerId: string): { projectId: string; zone: string; instanceName: string } {
  const match = /^gce:\/\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(providerId);
  if (!match) throw new UserError(`"${providerId}" is not a GCE provider id (gce://project/zone/name).`);
  return { projectId: match[1], zone: match[2], instanceName: match[3] };
}

export async function gcpNodePlatform(options: NodePlatformOptions): Promise<NodePlatform> {
  const providerOptions = (options.providerOptions ?? {}) as GcpProviderOptions;
  const metadata = new GcpNodeMetadata(providerOptions);
  const tee = teeOptions(options);
  const base = cloudPlatformBase('gcp', options, { metadata, stateDisk: GCP_STATE_DISK });
  const variant = base.variant;
  return {
    ...base,
    async issuer(tpm) {
      let template: Uint8Array;
      try {
        template = await tpm.nvRead(GCE_AK_TEMPLATE_INDEX_RSA);
      } catch (err) {
        if (!(err instanceof TpmError)) throw err;
        throw new UserError(
          `The vTPM has no GCE attestation-key template (NV index 0x${GCE_AK_TEMPLATE_INDEX_RSA.toString(16)}): ${err.message}`,
          { hint: 'Is this a GCE shielded VM?' },
        );
      }
      tpm.useAttestationKey({ kind: 'template', template });
      return new VtpmIssuer({
        variant,
        tpm,
        async instanceInfo(ak) {
          const instance = gceInstanceOf((await metadata.self()).providerId);
          if (variant === 'gcp-sev-es') return jsonBytes(instance);
          return jsonBytes({ ...instance, ...snpInstanceFields(await snpReport(akReportData(ak), tee)) });
        },
      });
    },
    cloudController: () => metadata.cloudControllerValues(),
    async validatorDeps() {
      const [{ shieldedIdentityClient }, { gcpInstanceIdentity }] = await Promise.all([
        import('./shielded-identity.js'),
        import('./instance-identity.js'),
      ]);
      return {
        ...kdsDeps(base.nodeDir),
        gcpShieldedIdentity: shieldedIdentityClient(providerOptions),
        gcpInstanceIdentity: gcpInstanceIdentity(providerOptions, () => metadata.clusterUid()),
      };
    },
  };
}
