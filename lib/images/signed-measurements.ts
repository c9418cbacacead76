/**
 * An image's signed measurements: the file `measurements.json`
 *
 *   {"version": "v2", "variant": "local-vtpm", "measurements": {"4": {"expected": "<hex>", "warnOnly": false}, ...}}
 *
 * and its detached signature `measurements.json.sig` (cosign sign-blob format, ./cosign-signature.ts).
 * Verification, in this order, so that nothing of an unsigned or edited file is ever used:
 *   1. the signature over the file's exact bytes, with the pinned key (refused: SignatureError, names file and key);
 *   2. the file's shape (JSON; a version, a known variant, measurements as in the config);
 *   3. that it is the file asked for: the expected version and variant (a correctly signed file of another image or
 *      variant must not slip in where this one was asked for).
 */
import { z } from 'zod';
import type { Measurements } from '../attestation/types.js';
import { measurementsSchema } from '../config/schema.js';
import { ATTESTATION_VARIANTS, type AttestationVariant } from '../config/variants.js';
import { UserError } from '../errors.js';
import type { TrustedKey } from '../signing-keys.js';
import { signBlob, verifyBlob } from './cosign-signature.js';
import { isImageVersion } from '../config/image-version.js';
import type { KeyObject } from 'node:crypto';

/** What a verified measurements file says: the image version, its attestation variant, its measurements. */
export interface SignedMeasurements {
  version: string;
  variant: AttestationVariant;
  measurements: Measurements;
}

/** A measurements file whose signature does not verify with the pinned key: it was edited, or signed by another key. */
export class SignatureError extends UserError {}

const fileSchema = z.strictObject({
  version: z.string().refine(isImageVersion, { message: 'is not an image version' }),
  variant: z.enum(ATTESTATION_VARIANTS),
  measurements: measurementsSchema,
});

/** The file's bytes: JSON, two-space indented, PCRs in ascending order, a final newline. */
export function encodeMeasurementsFile(signed: SignedMeasurements): Buffer {
  const measurements: Measurements = {};
  for (const index of Object.keys(signed.measurements).sort((a, b) => Number(a) - Number(b))) {
    const m = signed.measurements[index];
    measurements[index] = { expected: m.expected.toLowerCase(), warnOnly: m.warnOnly };
  }
  return Buffer.from(
    `${JSON.stringify({ version: signed.version, variant: signed.variant, measurements }, null, 2)}\n`,
  );
}

/** The file and its signature, ready to be written side by side. */
export function signMeasurementsFile(
  signed: SignedMeasurements,
  privateKey: KeyObject,
): { file: Buffer; signature: string } {
  const file = encodeMeasurementsFile(signed);
  return { file, signature: signBlob(privateKey, file) };
}

export interface VerifyMeasurementsRequest {
  /** The measurements file's exact bytes. */
  file: Uint8Array;
  /** The signature file's content (base64). */
  signature: string | Uint8Array;
  /** The pinned key the file must be signed with. */
  key: TrustedKey;
  /** Where the file came from (a URL or path), for messages. */
  source: string;
  /** What the file must describe; unset fields are not checked. */
  expect?: { version?: string; variant?: AttestationVariant };
}

const shortFingerprint = (key: TrustedKey) => key.fingerprint.slice(0, 16);

/** Verifies and parses a signed measurements file (see the module header for the order); throws a UserError. */
export function verifyMeasurementsFile(request: VerifyMeasurementsRequest): SignedMeasurements {
  const { key, source } = request;
  if (!verifyBlob(key.key, request.file, request.signature)) {
    throw new SignatureError(
      `The measurements ${source} do not verify with ${key.name} (key SHA-256 ${shortFingerprint(key)}…): the file was changed after it was signed, or it was signed with another key.`,
      {
        hint: 'Nothing was changed. Get the measurements and their signature from the image publisher again; for images you sign yourself, set measurementsSigningKey in the config to your public key.',
      },
    );
  }
  let parsed: z.output<typeof fileSchema>;
  try {
    parsed = fileSchema.parse(JSON.parse(Buffer.from(request.file).toString('utf8')));
  } catch (err) {
    const detail =
      err instanceof z.ZodError
        ? err.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')
        : (err as Error).message;
    throw new UserError(`The measurements ${source} are signed but not a measurements file (${detail}).`, {
      hint: 'A measurements file is JSON: {"version", "variant", "measurements"}. Ask its publisher for a correct one.',
      cause: err,
    });
  }
  const { expect } = request;
  if (expect?.version !== undefined && parsed.version !== expect.version) {
    throw new UserError(
      `The measurements ${source} are signed for image ${parsed.version}, not for ${expect.version}.`,
      {
        hint: 'Use the measurements published with the image you asked for.',
      },
    );
  }
  if (expect?.variant !== undefined && parsed.variant !== expect.variant) {
    throw new UserError(
      `The measurements ${source} are for attestation variant ${parsed.variant}, not for ${expect.variant} (the config's).`,
      {
        hint: `Use the measurements published for ${expect.variant}.`,
      },
    );
  }
  return { version: parsed.version, variant: parsed.variant, measurements: parsed.measurements };
}
