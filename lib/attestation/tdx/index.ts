/** Intel TDX: quote v4 parsing and verification against Intel's SGX Root CA (shipped with the package). */
export { verifyTdxQuote, TdxVerifier, TdxQuoteError } from './verify.js';
export type { VerifyTdxQuoteOptions, TdxVerifierOptions, TdxCheck, TdxCheckFailure } from './verify.js';
export { parseTdxQuote, TdxFormatError, TDX_SIGNED_SIZE } from './quote.js';
export type { TdxQuote, TdQuoteBody, QeReport } from './quote.js';
export { INTEL_SGX_ROOT_CA } from './intel-root.js';
