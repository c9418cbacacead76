/**
 * The vTPM evidence inside an attestation document (docs/design.md#attestation, lib/attestation/types.ts) in both directions:
 * decoded (bytes and maps, what issuers and validators work with) and encoded (base64 and hex, the JSON on the
 * wire); and the qualifying data that binds a quote to instance, user data and nonce.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { AttestationError, type AttestationDocument, type VtpmAttestation } from './types.js';

export interface DecodedQuote {
  hashAlg: number;
  quote: Uint8Array;
  signature: Uint8Array;
  pcrs: Map<number, Uint8Array>;
}

export interface DecodedVtpmAttestation {
  akPublic: Uint8Array;
  quotes: DecodedQuote[];
  eventLog?: Uint8Array;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
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

/** SHA-256(instanceInfo ‖ SHA-256(userData ‖ nonce)), the extraData of every quote (docs/design.md#attestation). */
export function qualifyingData(instanceInfo: Uint8Array, userData: Uint8Array, nonce: Uint8Array): Uint8Array {
  const inner = createHash('sha256').update(userData).update(nonce).digest();
  return new Uint8Array(createHash('sha256').update(instanceInfo).update(inner).digest());
}

export function encodeVtpmAttestation(a: DecodedVtpmAttestation): VtpmAttestation {
  const out: VtpmAttestation = {
    akPublic: b64(a.akPublic),
    quotes: a.quotes.map((q) => ({
      hashAlg: q.hashAlg,
      quote: b64(q.quote),
      signature: b64(q.signature),
      pcrs: Object.fromEntries(
        [...q.pcrs].sort(([x], [y]) => x - y).map(([i, v]) => [String(i), Buffer.from(v).toString('hex')]),
      ),
    })),
  };
  if (a.eventLog) out.eventLog = b64(a.eventLog);
  return out;
}

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

/** Decodes one base64 field of a document (instanceInfo, userData). */
export function decodeBase64Field(what: string, value: unknown): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value))
    throw new AttestationError(`The document's ${what} is not standard base64`);
  return fromB64(value);
}

function b64(b: Uint8Array): string {
  return Buffer.from(b).toString('base64');
}

function fromB64(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'base64'));
}
