/**
 * AMD SEV-SNP: report parsing and verification, AMD's shipped roots, and the KDS client. The public entry is
 * `verifySnpReport` (re-exported from ./attestation); variants use SnpVerifier and the KDS client directly.
 */
export { verifySnpReport, SnpVerifier, SnpReportError } from './verify.js';
export type {
  VerifySnpReportOptions,
  SnpVerifierOptions,
  SnpCheck,
  SnpCheckFailure,
  VerifiedSnpReport,
} from './verify.js';
export {
  parseSnpReport,
  decodeTcb,
  formatTcb,
  SnpFormatError,
  SNP_REPORT_SIZE,
  SNP_SIGNED_SIZE,
  SNP_PRODUCTS,
} from './report.js';
export type { SnpReport, SnpProduct, SnpSigningKey, SnpPolicy, TcbVersion } from './report.js';
export { AMD_ROOTS, AMD_OID, certificatesDer } from './certs.js';
export type { AmdRoots } from './certs.js';
export { KdsClient, kdsClientFor, kdsVcekUrl, kdsCertChainUrl, KDS_BASE_URL } from './kds.js';
export { kdsFetcher, defaultKdsCacheDir, KdsUnavailableError, type KdsFetcherOptions } from './kds-fetcher.js';
export type { Fetcher } from './kds.js';
