/**
 * The public attestation API (package export `./attestation`): verify TPM quotes and replay event logs
 * without the rest of the engine, build issuers and validators, and the document types.
 */
export * from './types.js';
export { verifyTpmQuote, pcrDigest, type TpmQuoteEvidence } from './tpm-quote.js';
export {
  parseEventLog,
  replayEventLog,
  EventLogError,
  EV_NO_ACTION,
  type EventLog,
  type TcgEvent,
  type SpecIdEvent,
} from './eventlog.js';
export { comparePcrs, formatMismatch, formatMismatchReport, validateMeasurements } from './measurements.js';
export {
  qualifyingData,
  encodeVtpmAttestation,
  type DecodedQuote,
  type DecodedVtpmAttestation,
} from './vtpm-document.js';
export { decodeVtpmAttestation } from './vtpm-document-decode.js';
export { VtpmIssuer, type VtpmIssuerOptions } from './vtpm-issuer.js';
export { createVtpmValidator, type TrustAk, type VtpmValidatorOptions } from './vtpm-validator.js';
export { createValidator, KNOWN_VARIANTS, isKnownVariant, type VariantName } from './registry.js';
export { localInstanceInfo } from './variants/local-vtpm.js';
export {
  parseTpmPublic,
  parseTpmSignature,
  parseTpmAttest,
  publicKeyFromTpmPublic,
  tpmName,
  type TpmPublic,
  type TpmRsaPublic,
  type TpmEccPublic,
  type TpmSignature,
  type TpmAttest,
  type PcrSelection,
} from '../tpm/structures.js';
export { TPM_ALG } from '../tpm/constants.js';
export {
  verifySnpReport,
  SnpReportError,
  parseSnpReport,
  type VerifySnpReportOptions,
  type VerifiedSnpReport,
  type SnpReport,
  type TcbVersion,
} from './snp/index.js';
export { verifyTdxQuote, TdxQuoteError } from './tdx/index.js';
