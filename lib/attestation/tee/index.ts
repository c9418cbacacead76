/**
 * The node's TEE report, whatever the kernel offers: configfs-tsm when its folder exists (SEV-SNP and TDX),
 * else /dev/sev-guest (SEV-SNP only). Paths and devices are options, so tests point them at emulations.
 */
import { UserError } from '../../errors.js';
import { parseCertTable, type SnpCerts } from './cert-table.js';
import { tsmAvailable, tsmReport, type TsmOptions } from './configfs-tsm.js';
import { sevGuestReport, type SevGuestDevice } from './sev-guest.js';

export { CERT_GUIDS, encodeCertTable, parseCertTable, type SnpCertKind, type SnpCerts } from './cert-table.js';
export { TSM_REPORT_ROOT, nodeTsmFs, type TsmFs, type TsmOptions } from './configfs-tsm.js';
export { SEV_GUEST_DEVICE, type SevGuestDevice } from './sev-guest.js';

export interface TeeReportOptions {
  tsm?: TsmOptions;
  sevGuest?: { path?: string; device?: SevGuestDevice };
}

/** An SEV-SNP report and the certificates the host handed out with it (DER, by kind). */
export interface SnpEvidence {
  report: Uint8Array;
  certs: SnpCerts;
}

export async function snpReport(reportData: Uint8Array, options: TeeReportOptions = {}): Promise<SnpEvidence> {
  if (await tsmAvailable(options.tsm)) {
    const answer = await tsmReport(reportData, options.tsm);
    if (answer.provider !== 'sev_guest')
      throw new UserError(`configfs-tsm answered a ${answer.provider} report, but this variant needs SEV-SNP.`);
    return { report: answer.outblob, certs: answer.auxblob ? parseCertTable(answer.auxblob) : {} };
  }
  const { report, certTable } = await sevGuestReport(reportData, options.sevGuest);
  return { report, certs: certTable.length > 0 ? parseCertTable(certTable) : {} };
}

/** A TDX quote over `reportData` (configfs-tsm only: the kernel asks the quoting enclave). */
export async function tdxQuote(reportData: Uint8Array, options: TeeReportOptions = {}): Promise<Uint8Array> {
  if (!(await tsmAvailable(options.tsm)))
    throw new UserError('TDX quotes need configfs-tsm (/sys/kernel/config/tsm/report), which this kernel lacks.');
  const answer = await tsmReport(reportData, options.tsm);
  if (answer.provider !== 'tdx_guest')
    throw new UserError(`configfs-tsm answered a ${answer.provider} report, but this variant needs TDX.`);
  return answer.outblob;
}
