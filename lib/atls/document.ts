/** Parsing an attestation document (DESIGN §5) received as JSON bytes; a malformed one is an AttestationError. */
import { z } from 'zod';
import { AttestationError, type AttestationDocument } from '../attestation/types.js';

const documentSchema = z.object({
  variant: z.string().min(1),
  attestation: z.record(z.string(), z.unknown()),
  instanceInfo: z.string(),
  userData: z.string(),
});

export function parseAttestationDocument(json: Uint8Array | string): AttestationDocument {
  let value: unknown;
  try {
    value = JSON.parse(typeof json === 'string' ? json : Buffer.from(json).toString('utf8'));
  } catch (cause) {
    throw new AttestationError('The attestation document is not valid JSON.', undefined, { cause });
  }
  const parsed = documentSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AttestationError(
      `The attestation document is malformed: ${issue.path.join('.') || '(top level)'}: ${issue.message}.`,
      undefined,
      { hint: 'An attestation document is JSON with the fields variant, attestation, instanceInfo and userData.' },
    );
  }
  return parsed.data as AttestationDocument;
}
