/**
 * The shielded-VM identity lookup the gcp-sev-es / gcp-sev-snp validators need (ValidatorDeps
 * `gcpShieldedIdentity`): Compute's instances.getShieldedInstanceIdentity, whose signing key is the
 * instance's attestation key. GCP returns it as a PEM certificate (ekCert) when it issued one, and always as a
 * PEM public key (ekPub): the first goes to `akCertDer`, the second, DER-encoded, to `akSpkiDer`.
 */
import type { InstancesClient } from '@google-cloud/compute';
import type { GcpShieldedIdentity, GcpShieldedIdentityClient } from '../../lib/attestation/variants/gcp-sev-es.js';
import { GcpCompute } from './clients.js';
import type { GcpProviderOptions } from './options.js';

export type GcpShieldedIdentityWithKey = GcpShieldedIdentity & {
  /** DER SubjectPublicKeyInfo of the signing key (GCP's signingKey.ekPub). */
  akSpkiDer?: Uint8Array;
};

/** PEM (certificate or public key) to DER. */
export function pemToDer(pem: string): Uint8Array {
  const body = pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, '').replace(/\s+/g, '');
  return new Uint8Array(Buffer.from(body, 'base64'));
}

/**
 * Options for the lookup by a verifier (`attestation verify`): the user's application default credentials (not the
 * cluster's service-account key), and the Compute endpoint from gcloud's CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE when
 * set (private endpoints), as gcloud honours it.
 */
export function verifierOptions(env: NodeJS.ProcessEnv = process.env): GcpProviderOptions {
  const options: GcpProviderOptions = {};
  const override = env.CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE;
  if (override) {
    const url = new URL(override);
    options.apiEndpoint = url.hostname;
    options.protocol = url.protocol === 'http:' ? 'http' : 'https';
    options.port = Number(url.port || (options.protocol === 'http' ? 80 : 443));
  }
  return options;
}

export function shieldedIdentityClient(options: GcpProviderOptions = {}): GcpShieldedIdentityClient {
  let api: Promise<GcpCompute> | undefined;
  return async ({ projectId, zone, instanceName }): Promise<GcpShieldedIdentityWithKey> => {
    const compute = await (api ??= GcpCompute.open(options));
    const instances = compute.client<InstancesClient>('InstancesClient');
    const [identity] = await compute.call(`Reading the shielded VM identity of ${instanceName}`, () =>
      instances.getShieldedInstanceIdentity({ project: projectId, zone, instance: instanceName }),
    );
    const { ekCert, ekPub } = identity.signingKey ?? {};
    return {
      ...(ekCert ? { akCertDer: pemToDer(ekCert) } : {}),
      ...(ekPub ? { akSpkiDer: pemToDer(ekPub) } : {}),
    };
  };
}
