/**
 * The generic validator of vTPM attestation documents (docs/design.md#attestation), step by step:
 *   1. trust the AK (the variant's rule, injected as `trustAk`);
 *   2. check the quote's signature with that AK;
 *   3. check the qualifying data: SHA-256(instanceInfo ‖ SHA-256(userData ‖ nonce));
 *   4. check the PCR digest of that same quote against the PCR values it comes with;
 *   5. compare exactly those verified values with the measurements (enforced mismatch rejects, warnOnly warns).
 * The compared bank follows the measurements' digest size (SHA-256 by default); SHA-1 banks are refused. Quotes
 * of other banks in the document are ignored: only the verified quote's values are ever compared or returned.
 * Cloud variants reuse it with their own `trustAk`.
 */
import { hashAlgName, TPM_ALG } from '../tpm/constants.js';
import {
  comparePcrs,
  formatMismatch,
  formatMismatchReport,
  requireCompleteMeasurements,
  validateMeasurements,
} from './measurements.js';
import { verifyTpmQuote } from './tpm-quote.js';
import {
  AttestationError,
  type AttestationDocument,
  type AttestedInstance,
  type Measurements,
  type ValidationResult,
  type Validator,
  type ValidatorDeps,
} from './types.js';
import { decodeBase64Field, qualifyingData } from './vtpm-document.js';

/**
 * Throws (preferably AttestationError) unless the AK is trusted for this instance; returns the instance when the
 * variant's rule identifies one (it then appears in the ValidationResult).
 */
export type TrustAk = (
  akPublic: Uint8Array,
  instanceInfo: Uint8Array,
  document: AttestationDocument,
) => Promise<AttestedInstance | void>;

export interface VtpmValidatorOptions {
  variant: string;
  measurements: Measurements;
  trustAk: TrustAk;
  deps?: ValidatorDeps;
}

const BANK_BY_DIGEST_SIZE = new Map([
  [20, TPM_ALG.SHA1],
  [32, TPM_ALG.SHA256],
  [48, TPM_ALG.SHA384],
  [64, TPM_ALG.SHA512],
]);

export function createVtpmValidator(options: VtpmValidatorOptions): Validator {
  const { variant, measurements, trustAk } = options;
  const size = validateMeasurements(measurements);
  const bank = size === undefined ? TPM_ALG.SHA256 : BANK_BY_DIGEST_SIZE.get(size);
  if (bank === undefined)
    throw new AttestationError(`Measurements of ${size} bytes match no PCR bank`, undefined, {
      hint: 'Fix the measurements in the config.',
    });
  if (bank === TPM_ALG.SHA1) {
    throw new AttestationError('Measurements of the SHA-1 PCR bank are refused: SHA-1 is broken', undefined, {
      hint: 'Use SHA-256 measurements.',
    });
  }
  requireCompleteMeasurements(measurements);

  return {
    variant,
    async validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult> {
      if (document?.variant !== variant) {
        throw new AttestationError(
          `The document is of variant "${String(document?.variant)}", but this cluster expects "${variant}"`,
        );
      }
      // Loaded at the first validation: the decoder brings zod, which a node's issuer, loaded with this module on
      // most platforms, does not need before the node listens (./vtpm-document-decode.ts).
      const { decodeVtpmAttestation } = await import('./vtpm-document-decode.js');
      const evidence = decodeVtpmAttestation(document.attestation);
      const instanceInfo = decodeBase64Field('instanceInfo', document.instanceInfo);
      const userData = decodeBase64Field('userData', document.userData);

      // 1. The AK: everything after this rests on it.
      let instance: AttestedInstance | void;
      try {
        instance = await trustAk(evidence.akPublic, instanceInfo, document);
      } catch (err) {
        if (err instanceof AttestationError) throw err;
        throw new AttestationError(`The attestation key is not trusted: ${(err as Error).message}`, undefined, {
          cause: err,
        });
      }

      // 2–4. The one quote of the compared bank.
      const quote = evidence.quotes.find((q) => q.hashAlg === bank);
      if (!quote) {
        const banks = evidence.quotes.map((q) => hashAlgName(q.hashAlg)).join(', ');
        const sha1 = evidence.quotes.every((q) => q.hashAlg === TPM_ALG.SHA1) ? ' (SHA-1 banks are refused)' : '';
        throw new AttestationError(
          `The document has no quote of the ${hashAlgName(bank)} PCR bank, only of: ${banks}${sha1}`,
        );
      }
      verifyTpmQuote({
        akPublic: evidence.akPublic,
        quote: quote.quote,
        signature: quote.signature,
        pcrs: quote.pcrs,
        hashAlg: quote.hashAlg,
        qualifyingData: options.deps?.quoteQualifyingData ?? qualifyingData(instanceInfo, userData, nonce),
      });

      // 5. The verified values against the measurements.
      const comparisons = comparePcrs(measurements, quote.pcrs);
      const enforced = comparisons.filter((c) => !c.match && !c.warnOnly);
      if (enforced.length > 0) {
        throw new AttestationError(`Measurements do not match:\n${formatMismatchReport(enforced)}`, comparisons, {
          hint: 'The node runs other software than the config expects. If that software is legitimate, update the measurements in the config.',
        });
      }
      const warnings = comparisons.filter((c) => !c.match).map(formatMismatch);
      for (const w of warnings) options.deps?.warn?.(w);
      return { ...(instance ? { instance } : {}), userData, pcrs: quote.pcrs, comparisons, warnings };
    },
  };
}
