/**
 * Decodes the vTPM evidence of a peer's attestation document (./vtpm-document.ts has its forms and the encoding),
 * checking its shape with zod: what validators load. Kept apart from the encoding so that a node that only issues
 * documents, as every node does until it validates a joining peer, does not compile zod at its start
 * (docs/workflows/node-images.md, "The node program's start in the VM").
 */
import { z } from 'zod';
import { AttestationError, type AttestationDocument } from './types.js';
import { BASE64, fromB64, type DecodedVtpmAttestation } from './vtpm-document.js';

const base64 = z.string().regex(BASE64, 'is not standard base64');
const hex = z.string().regex(/^([0-9a-fA-F]{2})*$/, 'is not hex');

const vtpmSchema = z.object({
  akPublic: base64,
  quotes: z
    .array(
      z.object({
        hashAlg: z.number().int(),
        quote: base64,
        signature: base64,
        pcrs: z.record(z.string().regex(/^(?:[0-9]|1[0-9]|2[0-3])$/, 'is not a PCR index 0-23'), hex),
      }),
    )
    .min(1, 'holds no quote')
    .max(8),
  eventLog: base64.optional(),
});

/** Decodes and shape-checks a document's vTPM evidence; AttestationError names the offending field. */
export function decodeVtpmAttestation(attestation: AttestationDocument['attestation']): DecodedVtpmAttestation {
  const parsed = vtpmSchema.safeParse(attestation);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AttestationError(
      `The document's vTPM evidence is malformed: attestation.${issue.path.join('.') || '(root)'} ${issue.message}`,
    );
  }
  const a = parsed.data;
  return {
    akPublic: fromB64(a.akPublic),
    quotes: a.quotes.map((q) => ({
      hashAlg: q.hashAlg,
      quote: fromB64(q.quote),
      signature: fromB64(q.signature),
      pcrs: new Map(Object.entries(q.pcrs).map(([i, v]) => [Number(i), new Uint8Array(Buffer.from(v, 'hex'))])),
    })),
    eventLog: a.eventLog === undefined ? undefined : fromB64(a.eventLog),
  };
}
