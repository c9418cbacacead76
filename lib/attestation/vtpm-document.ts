/**
 * The vTPM evidence inside an attestation document (docs/design.md#attestation, lib/attestation/types.ts): its
 * decoded form (bytes and maps, what issuers and validators work with), the encoding issuers put on the wire
 * (base64 and hex JSON), and the qualifying data that binds a quote to instance, user data and nonce. Decoding a
 * peer's document, which checks its shape with zod, is in ./vtpm-document-decode.ts, which only validators load: a
 * node issues its first documents before zod is compiled (docs/workflows/node-images.md, "The node program's start
 * in the VM").
 */
import { createHash } from 'node:crypto';
import { AttestationError, type VtpmAttestation } from './types.js';

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

/** Standard base64 (the document's byte fields). */
export const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

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

/** Decodes one base64 field of a document (instanceInfo, userData). */
export function decodeBase64Field(what: string, value: unknown): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value))
    throw new AttestationError(`The document's ${what} is not standard base64`);
  return fromB64(value);
}

function b64(b: Uint8Array): string {
  return Buffer.from(b).toString('base64');
}

export function fromB64(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'base64'));
}
