/**
 * SEV-SNP report verification: the certificate chain to AMD's ARK, the report's signature, and the checks on
 * its fields (TCB against the certificate, chip id, VMPL 0, no debug, minimum TCB, REPORT_DATA binding).
 *
 * Every check runs and every failure is reported together, so an error says *all* that is wrong (a tampered
 * VMPL shows as "VMPL is 1" and "signature does not verify"). A chain that verified is cached by the
 * fingerprint of its DER certificates, so verifying further reports from the same chip costs one ECDSA P-384
 * verification plus the field checks; certificate validity is still checked against the time of every call.
 */
import { timingSafeEqual, verify as cryptoVerify } from 'node:crypto';
import { AttestationError } from '../types.js';
import { DerError } from '../../der.js';
import { CertificateError } from '../certificate.js';
import {
  AMD_ROOTS,
  certificatesDer,
  endorsementKeyProductName,
  productFromProductName,
  sha256Hex,
  verifyChain,
  type AmdRoots,
  type ChainResult,
} from './certs.js';
import {
  formatTcb,
  parseSnpReport,
  productFromCpuid,
  SNP_SIGNED_SIZE,
  SnpFormatError,
  type SnpReport,
  type TcbVersion,
} from './report.js';

/** The check that failed: lets callers and tests tell reasons apart without matching message text. */
export type SnpCheck =
  | 'format'
  | 'chain'
  | 'validity'
  | 'signing-key'
  | 'product'
  | 'signature'
  | 'tcb'
  | 'chip-id'
  | 'vmpl'
  | 'debug'
  | 'minimum-tcb'
  | 'report-data';

export interface SnpCheckFailure {
  check: SnpCheck;
  message: string;
}

/** A report that failed verification; `failures` lists every check that failed, the message names them all. */
export class SnpReportError extends AttestationError {
  constructor(readonly failures: SnpCheckFailure[]) {
    super(`SEV-SNP report rejected: ${failures.map((f) => f.message).join('; ')}`, undefined, {
      hint: failures.some((f) => f.check === 'validity')
        ? "Check the verifier's clock, or fetch a current VCEK/VLEK certificate."
        : 'The report does not come from a trusted, correctly configured confidential VM; see docs/cloud-attestation.md.',
    });
  }

  has(check: SnpCheck): boolean {
    return this.failures.some((f) => f.check === check);
  }
}

export interface VerifySnpReportOptions {
  /** The VCEK or VLEK certificate, PEM or DER. */
  signingCert: string | Uint8Array;
  /** PEM: the ASK (for a VCEK) or ASVK (for a VLEK), then the ARK. Defaults to AMD's chain for the report's product. */
  certChain?: string;
  /** The time at which the certificates must be valid (default: now). */
  now?: Date;
  /** Minimum TCB the report's launch TCB and reported TCB must meet, component by component. */
  minimumTcb?: Partial<TcbVersion>;
  /** The expected REPORT_DATA; shorter values are compared as zero-padded to 64 bytes. */
  reportData?: Uint8Array;
}

export interface SnpVerifierOptions {
  /** Trusted roots per product (default: AMD's, shipped with the package). Tests pass their own. */
  roots?: AmdRoots;
  /** How many verified chains to keep (default 256). */
  cacheSize?: number;
}

/** The parsed report after every check passed, with the chain it was verified against. */
export type VerifiedSnpReport = SnpReport;

const TCB_FIELDS: (keyof TcbVersion)[] = ['fmc', 'bootloader', 'tee', 'snp', 'microcode'];

function tcbBelow(actual: TcbVersion, minimum: Partial<TcbVersion>): string[] {
  return TCB_FIELDS.filter((k) => minimum[k] !== undefined && (actual[k] ?? 0) < (minimum[k] as number)).map(
    (k) => `${k} ${actual[k] ?? 0} < ${minimum[k]}`,
  );
}

function padReportData(expected: Uint8Array): Uint8Array {
  if (expected.length > 64) throw new RangeError('expected REPORT_DATA is longer than 64 bytes');
  const out = new Uint8Array(64);
  out.set(expected);
  return out;
}

export class SnpVerifier {
  private readonly roots: AmdRoots;
  private readonly cacheSize: number;
  private readonly cache = new Map<string, ChainResult>();

  constructor(options: SnpVerifierOptions = {}) {
    this.roots = options.roots ?? AMD_ROOTS;
    this.cacheSize = options.cacheSize ?? 256;
  }

  /** Verifies a report; throws SnpReportError naming every failed check, else returns the parsed report. */
  verify(report: Uint8Array, options: VerifySnpReportOptions): VerifiedSnpReport {
    let parsed: SnpReport;
    let chain: ChainResult;
    try {
      parsed = parseSnpReport(report);
      const signingDer = certificatesDer(options.signingCert)[0];
      if (!signingDer) throw new DerError('the VCEK/VLEK certificate is empty or not PEM/DER');
      const chainPem = options.certChain ?? this.defaultChain(parsed, signingDer);
      const chainDer = certificatesDer(chainPem);
      chain = this.chainFor(signingDer, chainDer);
    } catch (err) {
      if (err instanceof SnpFormatError || err instanceof DerError || err instanceof CertificateError)
        throw new SnpReportError([{ check: 'format', message: err.message }]);
      throw err;
    }
    // Re-read the TCB fields with the layout of the chain's product (Turin differs from Milan/Genoa).
    if (chain.product && chain.product !== parsed.product && !parsed.cpuid)
      parsed = parseSnpReport(report, chain.product);

    const failures: SnpCheckFailure[] = chain.failures.map((message) => ({ check: 'chain', message }));
    const fail = (check: SnpCheck, message: string) => failures.push({ check, message });
    const now = (options.now ?? new Date()).getTime();
    for (const w of chain.validity) {
      if (!(now >= w.notBefore && now <= w.notAfter)) {
        fail(
          'validity',
          `the ${w.name} certificate is not valid at ${new Date(now).toISOString()} (valid ${new Date(w.notBefore).toISOString()} to ${new Date(w.notAfter).toISOString()})`,
        );
      }
    }
    const { info } = chain;
    if (info.kind && info.kind !== parsed.signingKey) {
      fail(
        'signing-key',
        `the report says it is signed by a ${parsed.signingKey.toUpperCase()}, but the certificate is a ${info.kind.toUpperCase()}`,
      );
    }
    const cpuProduct = productFromCpuid(parsed.cpuid);
    if (cpuProduct && chain.product && cpuProduct !== chain.product)
      fail('product', `the report comes from a ${cpuProduct} chip, the certificates are for ${chain.product}`);

    // The TCB the certificate was issued for must be the one the report claims (AMD derives the VCEK from it).
    const certTcb = info.tcb;
    const mismatched = TCB_FIELDS.filter(
      (k) => certTcb[k] !== undefined && certTcb[k] !== (parsed.reportedTcb[k] ?? 0),
    );
    if (mismatched.length > 0) {
      fail(
        'tcb',
        `the report's reported TCB (${formatTcb(parsed.reportedTcb)}) differs from the certificate's in ${mismatched.join(', ')}`,
      );
    }
    if (parsed.signingKey === 'vcek') {
      const hwId = info.hwId;
      // Turin's hardware id is 8 bytes; the report's CHIP_ID field is zero-padded to 64.
      const matches =
        hwId !== undefined &&
        hwId.length <= 64 &&
        Buffer.from(parsed.chipId.subarray(0, hwId.length)).equals(hwId) &&
        parsed.chipId.subarray(hwId.length).every((b) => b === 0);
      if (!matches)
        fail(
          'chip-id',
          parsed.maskChipId
            ? 'the report masks its chip id, so it cannot be matched to the VCEK'
            : "the report's chip id is not the VCEK's hardware id",
        );
    }
    if (parsed.vmpl !== 0)
      fail(
        'vmpl',
        `the report was made at VMPL ${parsed.vmpl}; only VMPL 0 (the guest's most privileged level) is accepted`,
      );
    if (parsed.policyFlags.debug)
      fail('debug', "the guest policy allows debugging (the host can decrypt the guest's memory)");
    if (options.minimumTcb) {
      const launch = tcbBelow(parsed.launchTcb, options.minimumTcb);
      if (launch.length > 0) fail('minimum-tcb', `the launch TCB is below the minimum: ${launch.join(', ')}`);
      const reported = tcbBelow(parsed.reportedTcb, options.minimumTcb);
      if (reported.length > 0) fail('minimum-tcb', `the reported TCB is below the minimum: ${reported.join(', ')}`);
    }
    if (options.reportData && !timingSafeEqual(padReportData(options.reportData), parsed.reportData)) {
      fail('report-data', 'REPORT_DATA does not bind the expected data');
    }
    const signature = Buffer.concat([parsed.signature.r, parsed.signature.s]);
    const signed = parsed.raw.subarray(0, SNP_SIGNED_SIZE);
    if (!cryptoVerify('sha384', signed, { key: chain.key, dsaEncoding: 'ieee-p1363' }, signature)) {
      fail(
        'signature',
        `the report's signature does not verify with the ${info.kind?.toUpperCase() ?? 'signing'} certificate`,
      );
    }
    if (failures.length > 0) throw new SnpReportError(failures);
    return parsed;
  }

  private defaultChain(report: SnpReport, signingDer: Uint8Array): string {
    const product =
      productFromCpuid(report.cpuid) ?? productFromProductName(endorsementKeyProductName(signingDer)) ?? 'Milan';
    const chains = this.roots[product];
    if (!chains) throw new DerError(`no certificate chain was given and none is known for ${product}`);
    return chains[report.signingKey];
  }

  private chainFor(signingDer: Uint8Array, chainDer: Uint8Array[]): ChainResult {
    const key = sha256Hex(signingDer, ...chainDer);
    const hit = this.cache.get(key);
    if (hit) {
      // Refresh the entry's position so the most recently used chains stay.
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const result = verifyChain(signingDer, chainDer, this.roots);
    if (result.chain) {
      if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(key, result);
    }
    return result;
  }
}

const defaultVerifier = new SnpVerifier();

/**
 * Verifies an SEV-SNP report against AMD's roots (shipped with the package). Throws SnpReportError saying which
 * checks failed; otherwise returns the parsed report.
 */
export function verifySnpReport(report: Uint8Array, options: VerifySnpReportOptions): VerifiedSnpReport {
  return defaultVerifier.verify(report, options);
}
