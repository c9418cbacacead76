/**
 * The node side of the cloud variants (docs/design.md#attestation): what a confidential VM puts into its attestation document's
 * instanceInfo, and where its platform keeps the pieces. The validators in ./variants/ check the same fields.
 *   aws-sev-snp, gcp-sev-snp   an SNP report whose REPORT_DATA is SHA-512 of the AK's SubjectPublicKeyInfo, plus the
 *                              VCEK/VLEK and ASK/ARK the host handed out with it
 *   azure-sev-snp, azure-tdx   Azure's paravisor (HCL) report from the vTPM's NV index: the TEE report, whose
 *                              REPORT_DATA binds the runtime data that holds the paravisor's AK (a persistent key)
 *   gcp-*                      the GCE instance (project, zone, name) whose shielded identity holds the AK, made by
 *                              GCE's vTPM from the template in its NV index
 */
import { createHash } from 'node:crypto';
import { UserError } from '../errors.js';
import { TPM_HR } from '../tpm/constants.js';
import { parseTpmPublic, publicKeyFromTpmPublic } from '../tpm/structures.js';
import type { SnpEvidence } from './tee/index.js';

/** Azure: the paravisor's attestation key (persistent handle) and its HCL report and AK certificate (NV indices). */
export const AZURE_AK_HANDLE = TPM_HR.PERSISTENT + 3;
export const AZURE_HCL_REPORT_INDEX = 0x01400001;
export const AZURE_AK_CERT_INDEX = 0x01c101d0;
/** GCE: the NV index of the RSA attestation key's template (the shielded identity's signing key). */
export const GCE_AK_TEMPLATE_INDEX_RSA = 0x01c10001;

/** SHA-512 of the AK's DER SubjectPublicKeyInfo: the REPORT_DATA of AWS and GCP SNP reports. */
export function akReportData(akPublic: Uint8Array): Uint8Array {
  const spki = publicKeyFromTpmPublic(parseTpmPublic(akPublic)).export({ type: 'spki', format: 'der' });
  return new Uint8Array(createHash('sha512').update(spki).digest());
}

export function pem(der: Uint8Array): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** The SNP fields of instanceInfo (see snpEvidenceFields in ./variants/cloud-common.ts). */
export function snpInstanceFields(evidence: SnpEvidence): {
  attestationReport: string;
  vcek?: string;
  vlek?: string;
  certChain?: string;
} {
  const { vcek, vlek, ask, ark } = evidence.certs;
  return {
    attestationReport: Buffer.from(evidence.report).toString('base64'),
    ...(vcek ? { vcek: pem(vcek) } : {}),
    ...(vlek ? { vlek: pem(vlek) } : {}),
    ...(ask && ark ? { certChain: pem(ask) + pem(ark) } : {}),
  };
}

/**
 * Azure's HCL report (NV index 0x01400001): a 32-byte header, the TEE report in a 1184-byte slot (SNP report, or a
 * 1024-byte TDX TD report), then the IGVM request data: size, version, report type (2 SNP, 4 TDX), hash type, the
 * runtime data's size (offset 1232) and the runtime data (offset 1236, JSON holding HCLAkPub).
 */
export const HCL = {
  headerSize: 32,
  teeSlot: 1184,
  reportTypeOffset: 1224,
  runtimeSizeOffset: 1232,
  runtimeOffset: 1236,
  SNP: 2,
  TDX: 4,
} as const;

export interface HclReport {
  kind: 'snp' | 'tdx';
  /** SNP: the 1184-byte report; TDX: the 1024-byte TD report. */
  teeReport: Uint8Array;
  runtimeData: Uint8Array;
}

export function parseHclReport(bytes: Uint8Array): HclReport {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (b.length < HCL.runtimeOffset || b.subarray(0, 4).toString('latin1') !== 'HCLA') {
    throw new UserError(
      `The vTPM's HCL report is malformed (${b.length} bytes, signature "${b.subarray(0, 4).toString('latin1')}").`,
      {
        hint: 'Is this an Azure confidential VM?',
      },
    );
  }
  const type = b.readUInt32LE(HCL.reportTypeOffset);
  if (type !== HCL.SNP && type !== HCL.TDX) throw new UserError(`The vTPM's HCL report is of unknown type ${type}.`);
  const size = b.readUInt32LE(HCL.runtimeSizeOffset);
  if (HCL.runtimeOffset + size > b.length)
    throw new UserError("The vTPM's HCL report is shorter than its runtime data says.");
  const kind = type === HCL.SNP ? 'snp' : 'tdx';
  return {
    kind,
    teeReport: new Uint8Array(b.subarray(HCL.headerSize, HCL.headerSize + (kind === 'snp' ? 1184 : 1024))),
    runtimeData: new Uint8Array(b.subarray(HCL.runtimeOffset, HCL.runtimeOffset + size)),
  };
}

/** An HCL report as the paravisor writes it (tests and the cloud-in-a-box platform play the paravisor). */
export function encodeHclReport(report: HclReport): Uint8Array {
  const b = Buffer.alloc(HCL.runtimeOffset + report.runtimeData.length);
  b.write('HCLA', 0, 'latin1');
  b.writeUInt32LE(2, 4);
  b.writeUInt32LE(b.length, 8);
  Buffer.from(report.teeReport).copy(b, HCL.headerSize);
  b.writeUInt32LE(20 + report.runtimeData.length, 1216);
  b.writeUInt32LE(1, 1220);
  b.writeUInt32LE(report.kind === 'snp' ? HCL.SNP : HCL.TDX, HCL.reportTypeOffset);
  b.writeUInt32LE(1, 1228);
  b.writeUInt32LE(report.runtimeData.length, HCL.runtimeSizeOffset);
  Buffer.from(report.runtimeData).copy(b, HCL.runtimeOffset);
  return new Uint8Array(b);
}
