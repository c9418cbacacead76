/**
 * azure-sev-snp: Azure confidential VMs (AMD SEV-SNP, DCasv5/ECasv5). Azure's paravisor (HCL) owns the vTPM and
 * puts SHA-256 of its runtime data, which holds the vTPM's attestation key (HCLAkPub), into the SNP report's
 * REPORT_DATA[0:32]. So: SNP report (VCEK → ASK → ARK, VMPL 0, no debug, TCB minimums, optional firmware-signer
 * digests) → runtime data → AK; then the vTPM quote with that AK proves the PCRs.
 *
 * instanceInfo (base64 JSON): { attestationReport: b64 (the report, optionally followed by Azure's header),
 * runtimeData: b64, vcek?: PEM (fetched from AMD's KDS when absent), certChain?: PEM (default: AMD's) }.
 *
 * Which VM: instanceInfo.identity is the VM's resource id and vmId as IMDS gave them to the measured node program
 * (the quote covers instanceInfo), as the EC2 identity document is on AWS; a join service asks ARM who that VM is in
 * its cluster (deps.azureInstanceIdentity), and a control-plane ticket needs the control-plane role
 * (joinservice/ticket-issuer.ts).
 */
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import type { VerifiedSnpReport } from '../snp/verify.js';
import {
  akKey,
  readInstanceInfo,
  snpEvidenceCheck,
  snpEvidenceFields,
  verifyHclRuntimeData,
  type AkTrust,
  type CloudDeps,
  azureAttestedInstance,
  azureIdentityField,
} from './cloud-common.js';
import { decodeBase64Field } from '../vtpm-document.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'azure-sev-snp';

export const instanceInfoSchema = z.object({
  ...snpEvidenceFields,
  runtimeData: z.string().min(1),
  ...azureIdentityField,
});
export type AzureSevSnpInstanceInfo = z.infer<typeof instanceInfoSchema>;

interface FirmwareSignerConfig {
  acceptedKeyDigests: string[];
  enforcementPolicy: 'Equal' | 'MAAFallback' | 'WarnOnly';
}

/** The config's accepted ID-key digests (the key that signed Azure's paravisor firmware), when set. */
function checkFirmwareSigner(config: VariantConfig, report: VerifiedSnpReport, warn: (m: string) => void): void {
  const signer = config.firmwareSignerConfig as FirmwareSignerConfig | undefined;
  if (!signer) return;
  const digest = Buffer.from(report.idKeyDigest).toString('hex');
  if (signer.acceptedKeyDigests.some((d) => d.toLowerCase() === digest)) return;
  const message = `${VARIANT}: the paravisor firmware was signed by ID key ${digest}, which is not in firmwareSignerConfig.acceptedKeyDigests`;
  if (signer.enforcementPolicy === 'WarnOnly') return warn(message);
  throw new AttestationError(message, undefined, {
    hint:
      signer.enforcementPolicy === 'MAAFallback'
        ? 'MAAFallback needs Microsoft Azure Attestation, which this verifier does not contact: add the digest to acceptedKeyDigests or use WarnOnly.'
        : 'Add the digest to acceptedKeyDigests if you trust that firmware signer.',
  });
}

/** The AK is trusted when the SNP report verifies and binds runtime data holding exactly this AK. */
export function azureSevSnpTrust(config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const checkSnp = snpEvidenceCheck(VARIANT, config, deps);
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    const ak = akKey(VARIANT, akPublic);
    const report = await checkSnp(info);
    checkFirmwareSigner(config, report, deps.warn ?? (() => {}));
    verifyHclRuntimeData(
      VARIANT,
      decodeBase64Field('instanceInfo.runtimeData', info.runtimeData),
      report.reportData,
      ak,
    );
    return azureAttestedInstance(info, akPublic, deps);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, azureSevSnpTrust(config, deps));
}
