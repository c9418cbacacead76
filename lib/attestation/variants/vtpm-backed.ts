/**
 * Every cloud variant is the generic vTPM quote validator plus a variant-specific rule for trusting the AK.
 * This is the one place that joins the two, so the variants stay about their binding rules only. The vTPM
 * validator is loaded on first use, so building a validator (e.g. for `--help` or config checks) stays cheap.
 */
import type { AttestationDocument, ValidationResult, Validator, VariantConfig } from '../types.js';
import type { AkTrust, CloudDeps } from './cloud-common.js';

export function vtpmBacked(variant: string, config: VariantConfig, deps: CloudDeps, trustAk: AkTrust): Validator {
  let inner: Promise<Validator> | undefined;
  return {
    variant,
    async validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult> {
      inner ??= import('../vtpm-validator.js').then(({ createVtpmValidator }) => createVtpmValidator({
          variant,
          measurements: config.measurements,
          // The variants' rules look at the whole document; the generic validator hands over the AK first.
          trustAk: (akPublic, _instanceInfo, doc) => trustAk(doc, akPublic),
          deps,
        }));
      return (await inner).validate(document, nonce);
    },
  };
}
