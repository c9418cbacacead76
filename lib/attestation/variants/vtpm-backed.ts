/**
 * Every cloud variant is the generic vTPM quote validator plus a variant-specific rule for trusting the AK.
 * This is the one place that joins the two, so the variants stay about their binding rules only. The vTPM
 * validator is loaded on first use, so building a validator (e.g. for `--help` or config checks) stays cheap.
 * The AK rule alone is also offered (checkEvidence): `attestation verify --evidence-only` checks TEE or cloud
 * evidence that comes without a quote (a report read from a VM, a cloud's own sample).
 */
import {
  AttestationError,
  type AttestationDocument,
  type ValidationResult,
  type Validator,
  type VariantConfig,
} from '../types.js';
import { decodeBase64Field } from '../vtpm-document.js';
import type { AkTrust, CloudDeps } from './cloud-common.js';

/** A validator whose AK rule can also run on its own. */
export interface EvidenceChecker {
  /** Runs only the variant's AK trust rule on the document's AK and instanceInfo; no quote is looked at. */
  checkEvidence(document: AttestationDocument): Promise<void>;
}

export function hasEvidenceCheck(validator: Validator): validator is Validator & EvidenceChecker {
  return typeof (validator as Partial<EvidenceChecker>).checkEvidence === 'function';
}

export function vtpmBacked(
  variant: string,
  config: VariantConfig,
  deps: CloudDeps,
  trustAk: AkTrust,
): Validator & EvidenceChecker {
  let inner: Promise<Validator> | undefined;
  return {
    variant,
    async validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult> {
      inner ??= import('../vtpm-validator.js').then(({ createVtpmValidator }) =>
        createVtpmValidator({
          variant,
          measurements: config.measurements,
          // The variants' rules look at the whole document; the generic validator hands over the AK first.
          trustAk: (akPublic, _instanceInfo, doc) => trustAk(doc, akPublic),
          deps,
        }),
      );
      return (await inner).validate(document, nonce);
    },
    async checkEvidence(document: AttestationDocument): Promise<void> {
      if (document?.variant !== variant)
        throw new AttestationError(
          `The document is of variant "${String(document?.variant)}", but this check is for "${variant}"`,
        );
      const akPublic = decodeBase64Field(
        'attestation.akPublic',
        (document.attestation as { akPublic?: unknown } | undefined)?.akPublic,
      );
      await trustAk(document, akPublic);
    },
  };
}
