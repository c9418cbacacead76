/**
 * A version index: which image versions exist and where their signed measurements are, for `upgrade check` and
 * `config fetch-measurements --index` on clouds.
 *
 *   {"images": [{"version": "v2.1.0",
 *                "measurementsUrl": "v2.1.0/measurements.json", "signatureUrl": "v2.1.0/measurements.json.sig",
 *                "image": "ami-0123456789abcdef0", "variant": "aws-sev-snp"}]}
 *
 * URLs may be relative to the index's own URL. `image` (optional) is what the config's `image` becomes for this
 * version (an AMI id, Azure image id or GCE image URL); without it, the version itself. `variant` (optional) lets a
 * reader skip entries of other attestation variants without fetching them; one version may have an entry per variant.
 * The index is not signed: it only points at files that are. A forged index can withhold versions, but cannot make
 * the CLI accept measurements that the pinned key did not sign.
 */
import { z } from 'zod';
import { ATTESTATION_VARIANTS, type AttestationVariant } from '../config/variants.js';
import { UserError } from '../errors.js';
import { isImageVersion } from '../config/image-version.js';
import { displayUrl } from './read-url.js';

export interface IndexedImage {
  version: string;
  /** What the config's `image` is set to for this version. */
  image: string;
  variant?: AttestationVariant;
  measurementsUrl: URL;
  signatureUrl: URL;
}

const indexSchema = z.object({
  images: z.array(
    z.object({
      version: z.string().refine(isImageVersion, { message: 'is not an image version' }),
      measurementsUrl: z.string().min(1),
      signatureUrl: z.string().min(1),
      image: z.string().min(1).optional(),
      variant: z.enum(ATTESTATION_VARIANTS).optional(),
    }),
  ),
});

/** Parses an index read from `indexUrl`; relative URLs in it are resolved against `indexUrl`. */
export function parseVersionIndex(text: string, indexUrl: URL): IndexedImage[] {
  const where = displayUrl(indexUrl);
  let parsed: z.output<typeof indexSchema>;
  try {
    parsed = indexSchema.parse(JSON.parse(text));
  } catch (err) {
    const detail =
      err instanceof z.ZodError
        ? err.issues.map((i) => `${i.path.join('.') || '(index)'}: ${i.message}`).join('; ')
        : (err as Error).message;
    throw new UserError(`The version index ${where} is not valid (${detail}).`, {
      hint: 'A version index is JSON: {"images": [{"version", "measurementsUrl", "signatureUrl", "image"?, "variant"?}]}.',
      cause: err,
    });
  }
  return parsed.images.map((entry, i) => {
    const resolve = (ref: string, key: string) => {
      let url: URL;
      try {
        url = new URL(ref, indexUrl);
      } catch (err) {
        throw new UserError(`The version index ${where} has an invalid URL at images.${i}.${key}: ${ref}.`, {
          cause: err,
        });
      }
      if (url.protocol !== 'https:' && url.protocol !== 'file:') {
        throw new UserError(
          `The version index ${where} points at ${url.href} (images.${i}.${key}); only https and file URLs are read.`,
        );
      }
      // A remote index must not make the CLI read files of this machine: it may point only at https.
      if (indexUrl.protocol === 'https:' && url.protocol !== 'https:') {
        throw new UserError(
          `The version index ${where} points at ${displayUrl(url)} (images.${i}.${key}); an index read over https may point only at https URLs.`,
          {
            hint: 'Local measurements files are named on the command line (-u <path>), never by a remote index.',
          },
        );
      }
      return url;
    };
    return {
      version: entry.version,
      image: entry.image ?? entry.version,
      ...(entry.variant ? { variant: entry.variant } : {}),
      measurementsUrl: resolve(entry.measurementsUrl, 'measurementsUrl'),
      signatureUrl: resolve(entry.signatureUrl, 'signatureUrl'),
    };
  });
}
