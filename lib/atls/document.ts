/**
 * Parsing an attestation document (docs/design.md#attestation) received as JSON bytes; a malformed one is an AttestationError,
 * and so is one over MAX_DOCUMENT_BYTES (real documents are a few KiB; an Azure SNP one with its certificates
 * under 16 KiB), which is refused before it is parsed.
 */
import { AttestationError, type AttestationDocument } from '../attestation/types.js';
import { JsonInputError, parseJson } from '../json.js';
import { checkShape, type ObjectField } from '../json-shape.js';
import { formatSize, SIZE_LIMITS } from '../workspace/regular-file.js';

export const MAX_DOCUMENT_BYTES = SIZE_LIMITS.attestationDocument;

// Checked by hand, not with zod: the node program loads this before it listens (lib/json-shape.ts says why).
// Other keys are dropped.
export const attestationDocumentShape: ObjectField = {
  kind: 'object',
  strict: false,
  fields: {
    variant: { kind: 'string', min: 1 },
    attestation: { kind: 'record' },
    instanceInfo: { kind: 'string' },
    userData: { kind: 'string' },
  },
};

export function parseAttestationDocument(json: Uint8Array | string): AttestationDocument {
  const size = typeof json === 'string' ? Buffer.byteLength(json) : json.length;
  if (size > MAX_DOCUMENT_BYTES) {
    throw new AttestationError(
      `The attestation document is ${formatSize(size)}; the limit is ${formatSize(MAX_DOCUMENT_BYTES)}.`,
    );
  }
  let value: unknown;
  try {
    value = parseJson(typeof json === 'string' ? json : Buffer.from(json).toString('utf8'));
  } catch (cause) {
    if (!(cause instanceof JsonInputError)) throw cause;
    throw new AttestationError(`The attestation document ${cause.message}.`, undefined, { cause });
  }
  const parsed = checkShape(value, attestationDocumentShape);
  if (!parsed.success) {
    const { issue } = parsed;
    throw new AttestationError(
      `The attestation document is malformed: ${issue.path.join('.') || '(top level)'}: ${issue.message}.`,
      undefined,
      { hint: 'An attestation document is JSON with the fields variant, attestation, instanceInfo and userData.' },
    );
  }
  return parsed.data as AttestationDocument;
}
