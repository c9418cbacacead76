/**
 * aws-sev-snp: AWS EC2 with AMD SEV-SNP (m6a/c6a/r6a). The vTPM runs outside the confidential context, so the
 * SNP report binds the AK itself: REPORT_DATA = SHA-512 of the AK's public key (DER SubjectPublicKeyInfo). AWS
 * signs reports with a VLEK (→ ASVK → ARK), which the evidence must carry; then the vTPM quote proves the PCRs.
 *
 * instanceInfo (base64 JSON): { attestationReport: b64, vlek?: PEM, vcek?: PEM (fetched from AMD's KDS when the
 * report is VCEK-signed and none is given), certChain?: PEM (default: AMD's chain for the signing key) }.
 */
import { z } from 'zod';
import type { Validator, VariantConfig } from '../types.js';
import { akKey, readInstanceInfo, sha512, snpEvidenceCheck, snpEvidenceFields, type AkTrust, type CloudDeps } from './cloud-common.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'aws-sev-snp';

export const instanceInfoSchema = z.object({ ...snpEvidenceFields, vlek: z.string().optional() });
export type AwsSevSnpInstanceInfo = z.infer<typeof instanceInfoSchema>;

export function awsSevSnpTrust(config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const checkSnp = snpEvidenceCheck(VARIANT, config, deps);
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    await checkSnp(info, { signingCert: info.vlek, reportData: sha512(akKey(VARIANT, akPublic).spki) });
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, awsSevSnpTrust(config, deps));
}
