/**
 * aws-sev-snp: AWS EC2 with AMD SEV-SNP (m6a/c6a/r6a). The vTPM runs outside the confidential context, so the
 * SNP report binds the AK itself: REPORT_DATA = SHA-512 of the AK's public key (DER SubjectPublicKeyInfo). AWS
 * signs reports with a VLEK (→ ASVK → ARK), which the evidence must carry; then the vTPM quote proves the PCRs.
 *
 * instanceInfo (base64 JSON): { attestationReport: b64, vlek?: PEM, vcek?: PEM (fetched from AMD's KDS when the
 * report is VCEK-signed and none is given), certChain?: PEM (default: AMD's chain for the signing key),
 * identity?: the EC2 instance identity document (JSON text) as the node read it from IMDS }.
 *
 * Which instance: the quote's qualifying data covers instanceInfo, so the identity document is what the attested
 * (measured) node program read from its instance's metadata service. A join service resolves its instanceId with
 * deps.awsInstanceIdentity (EC2: the instance's name, addresses and the role its cluster's tags give it, only for an
 * instance of its own cluster); a control-plane ticket needs that role (joinservice/ticket-issuer.ts).
 */
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import {
  akKey,
  readInstanceInfo,
  sha512,
  snpEvidenceCheck,
  snpEvidenceFields,
  type AkTrust,
  type CloudDeps,
} from './cloud-common.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'aws-sev-snp';

export const instanceInfoSchema = z.object({
  ...snpEvidenceFields,
  vlek: z.string().optional(),
  identity: z.string().optional(),
});
const identityDocumentSchema = z.looseObject({ instanceId: z.string().min(1), region: z.string().min(1) });
export type AwsSevSnpInstanceInfo = z.infer<typeof instanceInfoSchema>;

export function awsSevSnpTrust(config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const checkSnp = snpEvidenceCheck(VARIANT, config, deps);
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    await checkSnp(info, { signingCert: info.vlek, reportData: sha512(akKey(VARIANT, akPublic).spki) });
    if (!info.identity || !deps.awsInstanceIdentity) return undefined;
    let identity: z.infer<typeof identityDocumentSchema>;
    try {
      identity = identityDocumentSchema.parse(JSON.parse(info.identity));
    } catch (cause) {
      throw new AttestationError(
        'The instance identity document in the attestation is not one EC2 issues (instanceId, region).',
        undefined,
        { cause },
      );
    }
    return deps.awsInstanceIdentity(identity.instanceId, identity.region);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, awsSevSnpTrust(config, deps));
}
