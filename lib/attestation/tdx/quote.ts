/**
 * Intel TDX quote, version 4 (Intel "TDX DCAP Quote Generation Library and Quote Verification Library" spec):
 * a 48-byte header, the 584-byte TD report body, then the ECDSA-256 signature data: quote signature,
 * attestation key, and certification data of type 6 (QE report, its signature, QE auth data, and the PCK
 * certification data of type 5: the PCK certificate chain, PEM). Little-endian; parsing only, bounds-checked.
 */
import { AttestationError } from '../types.js';

export const TDX_HEADER_SIZE = 0x30;
export const TDX_BODY_SIZE = 0x248;
/** Header and body: what the attestation key signs. */
export const TDX_SIGNED_SIZE = TDX_HEADER_SIZE + TDX_BODY_SIZE;
export const TDX_TEE_TYPE = 0x81;
const QE_REPORT_SIZE = 0x180;

export interface TdQuoteBody {
  teeTcbSvn: Uint8Array;
  mrSeam: Uint8Array;
  mrSignerSeam: Uint8Array;
  seamAttributes: Uint8Array;
  tdAttributes: Uint8Array;
  xfam: Uint8Array;
  mrTd: Uint8Array;
  mrConfigId: Uint8Array;
  mrOwner: Uint8Array;
  mrOwnerConfig: Uint8Array;
  rtmrs: Uint8Array[];
  reportData: Uint8Array;
}

/** The Quoting Enclave's SGX report (an SGX REPORT_BODY). */
export interface QeReport {
  cpuSvn: Uint8Array;
  miscSelect: number;
  attributes: Uint8Array;
  mrEnclave: Uint8Array;
  mrSigner: Uint8Array;
  isvProdId: number;
  isvSvn: number;
  reportData: Uint8Array;
  raw: Uint8Array;
}

export interface TdxQuote {
  version: number;
  attestationKeyType: number;
  teeType: number;
  qeSvn: number;
  pceSvn: number;
  qeVendorId: Uint8Array;
  userData: Uint8Array;
  body: TdQuoteBody;
  /** ECDSA P-256 signature over header and body, r ‖ s big-endian. */
  signature: Uint8Array;
  /** The attestation key's public point, x ‖ y (64 bytes). */
  attestationKey: Uint8Array;
  qeReport: QeReport;
  qeReportSignature: Uint8Array;
  qeAuthData: Uint8Array;
  /** The PCK certificate chain, PEM: PCK certificate, intermediate CA, root CA. */
  pckChain: string;
  /** Header and body bytes. */
  signed: Uint8Array;
}

export class TdxFormatError extends AttestationError {}

class Reader {
  constructor(
    private readonly buf: Uint8Array,
    private pos = 0,
  ) {}
  take(n: number, what: string): Uint8Array {
    if (this.pos + n > this.buf.length) throw new TdxFormatError(`TDX quote is truncated in ${what}`);
    const out = this.buf.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  u16(what: string): number {
    const b = this.take(2, what);
    return b[0] | (b[1] << 8);
  }
  u32(what: string): number {
    const b = this.take(4, what);
    return (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0;
  }
}

function parseQeReport(raw: Uint8Array): QeReport {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  return {
    cpuSvn: raw.slice(0x00, 0x10),
    miscSelect: view.getUint32(0x10, true),
    attributes: raw.slice(0x30, 0x40),
    mrEnclave: raw.slice(0x40, 0x60),
    mrSigner: raw.slice(0x80, 0xa0),
    isvProdId: view.getUint16(0x100, true),
    isvSvn: view.getUint16(0x102, true),
    reportData: raw.slice(0x140, 0x180),
    raw,
  };
}

/**
 * The PCK chain is NUL-terminated (and often NUL-padded). Stripped by walking back over the bytes: the regex
 * /\0+$/ retried from every NUL of a run that does not end the input, which made a 128 KiB chain take 24 s.
 */
function withoutTrailingNuls(bytes: Uint8Array): Uint8Array {
  let end = bytes.length;
  while (end > 0 && bytes[end - 1] === 0) end--;
  return bytes.subarray(0, end);
}

export function parseTdxQuote(bytes: Uint8Array): TdxQuote {
  const r = new Reader(bytes);
  const version = r.u16('the header');
  if (version !== 4) throw new TdxFormatError(`TDX quote version ${version} is not supported (4 is)`);
  const attestationKeyType = r.u16('the header');
  if (attestationKeyType !== 2)
    throw new TdxFormatError(`TDX quote attestation key type ${attestationKeyType} is not ECDSA-256 with P-256 (2)`);
  const teeType = r.u32('the header');
  if (teeType !== TDX_TEE_TYPE) throw new TdxFormatError(`quote TEE type 0x${teeType.toString(16)} is not TDX (0x81)`);
  const qeSvn = r.u16('the header');
  const pceSvn = r.u16('the header');
  const qeVendorId = r.take(16, 'the header');
  const userData = r.take(20, 'the header');
  const b = (n: number) => r.take(n, 'the TD report body');
  const body: TdQuoteBody = {
    teeTcbSvn: b(16),
    mrSeam: b(48),
    mrSignerSeam: b(48),
    seamAttributes: b(8),
    tdAttributes: b(8),
    xfam: b(8),
    mrTd: b(48),
    mrConfigId: b(48),
    mrOwner: b(48),
    mrOwnerConfig: b(48),
    rtmrs: [b(48), b(48), b(48), b(48)],
    reportData: b(64),
  };
  const signedDataSize = r.u32('the signature data size');
  const sd = new Reader(r.take(signedDataSize, 'the signature data'));
  const signature = sd.take(64, 'the quote signature');
  const attestationKey = sd.take(64, 'the attestation key');
  const certType = sd.u16('the certification data');
  if (certType !== 6) throw new TdxFormatError(`TDX quote certification data type ${certType} is not a QE report (6)`);
  const cert = new Reader(sd.take(sd.u32('the certification data'), 'the certification data'));
  const qeReport = parseQeReport(cert.take(QE_REPORT_SIZE, 'the QE report'));
  const qeReportSignature = cert.take(64, 'the QE report signature');
  const qeAuthData = cert.take(cert.u16('the QE auth data'), 'the QE auth data');
  const pckType = cert.u16('the PCK certification data');
  if (pckType !== 5)
    throw new TdxFormatError(`TDX quote PCK certification data type ${pckType} is not a PCK certificate chain (5)`);
  const pckChain = Buffer.from(
    withoutTrailingNuls(cert.take(cert.u32('the PCK certificate chain'), 'the PCK certificate chain')),
  ).toString('utf8');
  return {
    version,
    attestationKeyType,
    teeType,
    qeSvn,
    pceSvn,
    qeVendorId,
    userData,
    body,
    signature,
    attestationKey,
    qeReport,
    qeReportSignature,
    qeAuthData,
    pckChain,
    signed: bytes.slice(0, TDX_SIGNED_SIZE),
  };
}
