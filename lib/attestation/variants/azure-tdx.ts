/**
 * azure-tdx: Azure confidential VMs with Intel TDX (DCesv5). As for azure-sev-snp, Azure's paravisor binds its
 * runtime data (holding the vTPM's AK) into the TEE report: here the TDX quote v4's REPORT_DATA[0:32]. So: TDX
 * quote (PCK chain → Intel SGX Root CA, QE report, attestation key, MRSEAM, TEE TCB SVN, QE/PCE SVN, no debug) →
 * runtime data → AK; then the vTPM quote proves the PCRs.
 *
 * Config: qeSVN, pceSVN (minimums), teeTCBSVN (hex, 16 bytes, minimum per component), mrSeam (hex, 48 bytes;
 * all zeros means "not pinned" and only warns). instanceInfo (base64 JSON): { attestationReport: b64 quote,
 * runtimeData: b64 }.
 *
 * Which VM: instanceInfo.identity is the VM's resource id and vmId as IMDS gave them to the measured node program
 * (the quote covers instanceInfo), as the EC2 identity document is on AWS; a join service asks ARM who that VM is in
 * its cluster (deps.azureInstanceIdentity), and a control-plane ticket needs the control-plane role
 * (joinservice/ticket-issuer.ts).
 */
import { z } from 'zod';
import { AttestationError, type Validator, type VariantConfig } from '../types.js';
import { TdxVerifier, type VerifyTdxQuoteOptions } from '../tdx/verify.js';
import {
  akKey,
  readInstanceInfo,
  verifyHclRuntimeData,
  type AkTrust,
  type CloudDeps,
  azureAttestedInstance,
  azureIdentityField,
} from './cloud-common.js';
import { decodeBase64Field } from '../vtpm-document.js';
import { vtpmBacked } from './vtpm-backed.js';

export const VARIANT = 'azure-tdx';

export const instanceInfoSchema = z.object({
  attestationReport: z.string().min(1),
  runtimeData: z.string().min(1),
  ...azureIdentityField,
});
export type AzureTdxInstanceInfo = z.infer<typeof instanceInfoSchema>;

function hexField(config: VariantConfig, key: string, bytes: number): Uint8Array | undefined {
  const value = config[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(value)) {
    throw new AttestationError(`${VARIANT}: config attestation.${key} must be ${bytes} bytes of hex`);
  }
  return new Uint8Array(Buffer.from(value, 'hex'));
}

export function tdxOptions(
  config: VariantConfig,
  warn: (m: string) => void,
): Omit<VerifyTdxQuoteOptions, 'now' | 'reportData'> {
  const num = (key: string) => (typeof config[key] === 'number' ? (config[key] as number) : undefined);
  let mrSeam = hexField(config, 'mrSeam', 48);
  if (mrSeam?.every((b) => b === 0)) {
    warn(
      `${VARIANT}: attestation.mrSeam is all zeros, so the TDX module's measurement is not checked; set it to pin the module`,
    );
    mrSeam = undefined;
  }
  return { qeSvn: num('qeSVN'), pceSvn: num('pceSVN'), teeTcbSvn: hexField(config, 'teeTCBSVN', 16), mrSeam };
}

export function azureTdxTrust(config: VariantConfig, deps: CloudDeps = {}): AkTrust {
  const verifier = new TdxVerifier({ roots: deps.intelRoots });
  const options = tdxOptions(config, deps.warn ?? (() => {}));
  return async (document, akPublic) => {
    const info = readInstanceInfo(VARIANT, document, instanceInfoSchema);
    const ak = akKey(VARIANT, akPublic);
    const quote = verifier.verify(decodeBase64Field('instanceInfo.attestationReport', info.attestationReport), {
      ...options,
      now: deps.now?.(),
    });
    verifyHclRuntimeData(
      VARIANT,
      decodeBase64Field('instanceInfo.runtimeData', info.runtimeData),
      quote.body.reportData,
      ak,
    );
    return azureAttestedInstance(info, akPublic, deps);
  };
}

export function createValidator(config: VariantConfig, deps: CloudDeps = {}): Validator {
  return vtpmBacked(VARIANT, config, deps, azureTdxTrust(config, deps));
}
