/**
 * gcp-sev-es: GCP confidential VMs with AMD SEV-ES (n2d/c2d). SEV-ES has no attestation report, so the AK is
 * trusted because GCP's Compute API (getShieldedInstanceIdentity, called through the injected
 * `deps.gcpShieldedIdentity`) returns it for the instance the node names (as a TPMT_PUBLIC, an AK certificate or
 * a SubjectPublicKeyInfo); then the vTPM quote proves the PCRs.
 *
 * instanceInfo (base64 JSON): { projectId, zone, instanceName }.
 *
 * Which instance: the AK is the one GCP registered for exactly the named instance, so the instance is proven; a join
 * service then asks Compute who it is in its cluster (deps.gcpInstanceIdentity: name, addresses, the role its
 * template gave it), and a control-plane ticket needs that role (joinservice/ticket-issuer.ts).
 */
import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import { akKey, readInstanceInfo, sameKey, type AkKey, type AkTrust, type CloudDeps } from './cloud-common.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'gcp-sev-es';

export const gcpInstanceSchema = z.object({
  projectId: z.string().min(1),
  zone: z.string().min(1),
  instanceName: z.string().min(1),
});
export type GcpInstanceInfo = z.infer<typeof gcpInstanceSchema>;

/** What GCP's getShieldedInstanceIdentity says about the instance's attestation key (any one field suffices). */
export interface GcpShieldedIdentity {
  /** The AK's TPMT_PUBLIC. */
  akPublic?: Uint8Array;
  /** The AK certificate GCP issued, DER. */
  akCertDer?: Uint8Array;
  /** The AK's public key, DER SubjectPublicKeyInfo (GCP's signingKey.ekPub, which it returns also without a certificate). */
  akSpkiDer?: Uint8Array;
}
export type GcpShieldedIdentityClient = (instance: GcpInstanceInfo) => Promise<GcpShieldedIdentity>;

/** The document's AK must be the one GCP registered for the instance. */
export async function verifyGcpShieldedAk(
  variant: string,
  instance: GcpInstanceInfo,
  ak: AkKey,
  akPublic: Uint8Array,
  deps: CloudDeps,
): Promise<void> {
  const client = deps.gcpShieldedIdentity as GcpShieldedIdentityClient | undefined;
  if (!client)
    throw new AttestationError(
      `${variant}: no GCP client is configured to look up the instance's shielded VM identity`,
    );
  let identity: GcpShieldedIdentity;
  try {
    identity = await client(instance);
  } catch (cause) {
    throw new AttestationError(
      `${variant}: looking up the shielded VM identity of ${instance.projectId}/${instance.zone}/${instance.instanceName} failed: ${(cause as Error)?.message ?? String(cause)}`,
      undefined,
      { cause },
    );
  }
  if (identity.akPublic) {
    if (Buffer.from(identity.akPublic).equals(akPublic) || sameKey(akKey(variant, identity.akPublic).key, ak.key))
      return;
    throw new AttestationError(
      `${variant}: the quote's attestation key is not the one GCP registered for instance ${instance.instanceName}`,
    );
  }
  if (identity.akCertDer) {
    const certified = gcpKey(variant, 'AK certificate', () => new X509Certificate(identity.akCertDer!).publicKey);
    if (sameKey(certified, ak.key)) return;
    throw new AttestationError(
      `${variant}: the quote's attestation key is not the one in GCP's AK certificate for instance ${instance.instanceName}`,
    );
  }
  if (identity.akSpkiDer) {
    const registered = gcpKey(variant, 'AK public key', () =>
      createPublicKey({ key: Buffer.from(identity.akSpkiDer!), format: 'der', type: 'spki' }),
    );
    if (sameKey(registered, ak.key)) return;
    throw new AttestationError(
      `${variant}: the quote's attestation key is not the one GCP registered for instance ${instance.instanceName}`,
    );
  }
  throw new AttestationError(`${variant}: GCP returned no attestation key for instance ${instance.instanceName}`);
}

/** A key GCP returned, read by `read`; an AttestationError when it is malformed. */
function gcpKey(variant: string, what: string, read: () => KeyObject): KeyObject {
  try {
    return read();
  } catch (cause) {
    throw new AttestationError(`${variant}: GCP's ${what} is malformed (${(cause as Error).message})`, undefined, {
      cause,
    });
  }
}

export function gcpSevEsTrust(_config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, gcpInstanceSchema);
    await verifyGcpShieldedAk(VARIANT, info, akKey(VARIANT, akPublic), akPublic, deps);
    return deps.gcpInstanceIdentity?.(info);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, gcpSevEsTrust(config, deps));
}
