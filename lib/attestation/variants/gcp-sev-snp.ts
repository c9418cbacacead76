/**
 * gcp-sev-snp: GCP confidential VMs with AMD SEV-SNP (n2d). The AK is trusted twice over: GCP's shielded VM
 * identity returns it (as for gcp-sev-es), and the SNP report (VCEK → ASK → ARK, VMPL 0, no debug, TCB minimums)
 * binds it: REPORT_DATA = SHA-512 of the AK's DER SubjectPublicKeyInfo. Then the vTPM quote proves the PCRs.
 *
 * instanceInfo (base64 JSON): { projectId, zone, instanceName, attestationReport: b64, vcek?: PEM (fetched from
 * AMD's KDS when absent), certChain?: PEM (default: AMD's) }. The instance is named as for gcp-sev-es.
 */
import { z } from 'zod';
import type { Validator, VariantConfig } from '../types.js';
import {
  akKey,
  readInstanceInfo,
  sha512,
  snpEvidenceCheck,
  snpEvidenceFields,
  type AkTrust,
  type CloudDeps,
} from './cloud-common.js';
import { gcpInstanceSchema, verifyGcpShieldedAk } from './gcp-sev-es.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'gcp-sev-snp';

export const instanceInfoSchema = gcpInstanceSchema.extend(snpEvidenceFields);
export type GcpSevSnpInstanceInfo = z.infer<typeof instanceInfoSchema>;

export function gcpSevSnpTrust(config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const checkSnp = snpEvidenceCheck(VARIANT, config, deps);
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    const ak = akKey(VARIANT, akPublic);
    const instance = { projectId: info.projectId, zone: info.zone, instanceName: info.instanceName };
    await verifyGcpShieldedAk(VARIANT, instance, ak, akPublic, deps);
    await checkSnp(info, { reportData: sha512(ak.spki) });
    return deps.gcpInstanceIdentity?.(instance);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, gcpSevSnpTrust(config, deps));
}
