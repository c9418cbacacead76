/**
 * SEV-SNP reports through /dev/sev-guest (kernels without configfs-tsm): the SNP_GET_EXT_REPORT ioctl with a
 * 64-byte report data and a buffer for the certificate table. Layouts (linux/sev-guest.h):
 *   snp_guest_request_ioctl { u8 msg_version; u64 req_data; u64 resp_data; u64 exitinfo2 }       32 bytes
 *   snp_ext_report_req      { snp_report_req { u8 user_data[64]; u32 vmpl; u8 rsvd[28] };
 *                             u64 certs_address; u32 certs_len }                                 112 bytes
 *   snp_report_resp         { u8 data[4000] } = msg_report_resp { u32 status; u32 report_size; u8 rsvd[24]; report }
 * When the certificate buffer is too small the host says so (exitinfo2 vmm error 1) and sets certs_len: the call is
 * made again with that size. Node cannot issue an ioctl itself: the default device calls libc's ioctl through
 * koffi (loaded on first use); tests pass a SevGuestDevice that plays the kernel.
 */
import { UserError } from '../../errors.js';

export const SEV_GUEST_DEVICE = '/dev/sev-guest';
/** _IOWR('S', 0x2, struct snp_guest_request_ioctl). */
export const SNP_GET_EXT_REPORT = 0xc0205302;
const REQUEST_SIZE = 112;
const RESPONSE_SIZE = 4000;
const REPORT_OFFSET = 32;
/** The host's "certificate buffer too small" (SNP_GUEST_VMM_ERR_INVALID_LEN, in exitinfo2's upper half). */
const VMM_ERR_INVALID_LEN = 1;

/** The one ioctl, with the request and response buffers and the certificate buffer it points at. */
export interface SevGuestDevice {
  /** Issues SNP_GET_EXT_REPORT; returns the ioctl's result (0 or -errno) and exitinfo2. The buffers are filled in place. */
  extReport(request: Buffer, response: Buffer, certs: Buffer): Promise<{ result: number; exitinfo2: bigint }>;
  close(): Promise<void>;
}

export interface SevGuestReport {
  report: Uint8Array;
  /** The certificate table (possibly empty). */
  certTable: Uint8Array;
}

export async function sevGuestReport(
  reportData: Uint8Array,
  options: { device?: SevGuestDevice; path?: string; vmpl?: number } = {},
): Promise<SevGuestReport> {
  if (reportData.length !== 64)
    throw new UserError(`An SEV-SNP report takes 64 bytes of report data, got ${reportData.length}.`);
  const device = options.device ?? (await openSevGuest(options.path ?? SEV_GUEST_DEVICE));
  try {
    let certsLen = 4 * 4096;
    for (let attempt = 0; attempt < 2; attempt++) {
      const request = Buffer.alloc(REQUEST_SIZE);
      Buffer.from(reportData).copy(request, 0);
      request.writeUInt32LE(options.vmpl ?? 0, 64);
      request.writeUInt32LE(certsLen, 104);
      const response = Buffer.alloc(RESPONSE_SIZE);
      const certs = Buffer.alloc(certsLen);
      const { result, exitinfo2 } = await device.extReport(request, response, certs);
      if (result !== 0) {
        if (Number(exitinfo2 >> 32n) === VMM_ERR_INVALID_LEN && attempt === 0) {
          certsLen = request.readUInt32LE(104);
          continue;
        }
        throw new UserError(
          `SNP_GET_EXT_REPORT on ${options.path ?? SEV_GUEST_DEVICE} failed (result ${result}, exitinfo2 0x${exitinfo2.toString(16)}).`,
        );
      }
      const status = response.readUInt32LE(0);
      const size = response.readUInt32LE(4);
      if (status !== 0)
        throw new UserError(`The SEV-SNP firmware refused the report request (status 0x${status.toString(16)}).`);
      if (size > RESPONSE_SIZE - REPORT_OFFSET)
        throw new UserError(`The SEV-SNP firmware answered a report of ${size} bytes.`);
      return {
        report: new Uint8Array(response.subarray(REPORT_OFFSET, REPORT_OFFSET + size)),
        certTable: new Uint8Array(certs),
      };
    }
    throw new UserError('The host kept asking for a larger SEV-SNP certificate buffer.');
  } finally {
    if (!options.device) await device.close();
  }
}

/** /dev/sev-guest through libc's ioctl (koffi). */
async function openSevGuest(path: string): Promise<SevGuestDevice> {
  const { promises: fs } = await import('node:fs');
  let handle: Awaited<ReturnType<typeof fs.open>>;
  try {
    handle = await fs.open(path, 'r+');
  } catch (err) {
    throw new UserError(`Cannot open ${path}: ${(err as Error).message}`, {
      cause: err,
      hint: 'Is this an SEV-SNP guest whose kernel has the sev-guest driver?',
    });
  }
  const koffi = (await import('koffi')).default;
  const ioctl = koffi.load('libc.so.6').func('int ioctl(int, unsigned long, _Inout_ uint8_t *)');
  return {
    async extReport(request, response, certs) {
      request.writeBigUInt64LE(BigInt(koffi.address(certs) as bigint), 96);
      const arg = Buffer.alloc(32);
      arg.writeUInt8(1, 0); // msg_version
      arg.writeBigUInt64LE(BigInt(koffi.address(request) as bigint), 8);
      arg.writeBigUInt64LE(BigInt(koffi.address(response) as bigint), 16);
      const rc = ioctl(handle.fd, SNP_GET_EXT_REPORT, arg) as number;
      return { result: rc === 0 ? 0 : -(koffi.errno() as number), exitinfo2: arg.readBigUInt64LE(24) };
    },
    close: () => handle.close(),
  };
}
