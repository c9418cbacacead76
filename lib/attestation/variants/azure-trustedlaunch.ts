/**
 * azure-trustedlaunch: Azure trusted launch VMs (not confidential VMs). Azure's vTPM holds an AK certificate
 * (NV index 0x01C101D0) issued by Microsoft's vTPM CAs; the AK is trusted when that certificate chains to one of
 * Microsoft's roots (shipped; `deps.microsoftRoots` overrides) and holds exactly the quote's AK. The vTPM quote
 * then proves the PCRs. Protects against a wrong image, not against a malicious host.
 *
 * instanceInfo (base64 JSON): { akCert: b64 DER, intermediates?: b64 DER[] (the issuing CAs) }.
 *
 * Which VM: instanceInfo.identity is the VM's resource id and vmId as IMDS gave them to the measured node program
 * (the quote covers instanceInfo), as the EC2 identity document is on AWS; a join service asks ARM who that VM is in
 * its cluster (deps.azureInstanceIdentity), and a control-plane ticket needs the control-plane role
 * (joinservice/ticket-issuer.ts).
 */
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import { certificatesDer } from '../snp/certs.js';
import {
  akKey,
  readInstanceInfo,
  sameKey,
  verifyCertChain,
  type AkTrust,
  type CloudDeps,
  azureAttestedInstance,
  azureIdentityField,
} from './cloud-common.js';
import { decodeBase64Field } from '../vtpm-document.js';
import { MICROSOFT_VTPM_ROOTS } from './microsoft-roots.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'azure-trustedlaunch';

export const instanceInfoSchema = z.object({
  akCert: z.string().min(1),
  intermediates: z.array(z.string().min(1)).optional(),
  ...azureIdentityField,
});
export type AzureTrustedLaunchInstanceInfo = z.infer<typeof instanceInfoSchema>;

export function azureTrustedLaunchTrust(_config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const roots = (deps.microsoftRoots ?? MICROSOFT_VTPM_ROOTS).flatMap((pem) => certificatesDer(pem));
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    const ak = akKey(VARIANT, akPublic);
    const intermediates = (info.intermediates ?? []).map((c, i) =>
      decodeBase64Field(`instanceInfo.intermediates[${i}]`, c),
    );
    const cert = verifyCertChain(
      `${VARIANT}: AK certificate`,
      decodeBase64Field('instanceInfo.akCert', info.akCert),
      intermediates,
      roots,
      deps.now?.() ?? new Date(),
    );
    if (!sameKey(cert.publicKey, ak.key))
      throw new AttestationError(`${VARIANT}: the AK certificate is not for the quote's attestation key`);
    return azureAttestedInstance(info, akPublic, deps);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, azureTrustedLaunchTrust(config, deps));
}
