/**
 * Ephemeral ECDH P-256 key pairs for one exchange, on node:crypto's synchronous ECDH (a key pair takes
 * ~20 µs; WebCrypto's generateKey ~150 µs, most of it the async job around the math, on the exchange's
 * critical path). Public keys travel as uncompressed SEC1 points (0x04 ‖ X ‖ Y, 65 bytes); checking one
 * decodes it onto the curve, so a malformed key is refused before anything is sealed to it.
 */
import { createECDH, ECDH } from 'node:crypto';
import { UserError } from '../errors.js';

export const PUBLIC_KEY_LENGTH = 65;
const CURVE = 'prime256v1';

/** The private half: a node:crypto ECDH object holding one fresh key, never exported. */
export type EcdhPrivateKey = ECDH;

export interface EphemeralKeyPair {
  privateKey: EcdhPrivateKey;
  /** Uncompressed SEC1 point, 65 bytes. */
  publicKey: Uint8Array;
}

export function generateEphemeralKeyPair(): EphemeralKeyPair {
  const privateKey = createECDH(CURVE);
  return { privateKey, publicKey: new Uint8Array(privateKey.generateKeys()) };
}

/** Checks a peer's public key; a UserError when it is not an uncompressed P-256 point on the curve. */
export function checkPublicKey(point: Uint8Array): void {
  onCurve(point, () => ECDH.convertKey(point, CURVE)); // decoding the point fails unless it is on the curve
}

/** The ECDH shared secret (the X coordinate, 32 bytes) with a peer's public key, checked like checkPublicKey. */
export function sharedSecret(privateKey: EcdhPrivateKey, peerPoint: Uint8Array): Buffer {
  return onCurve(peerPoint, () => privateKey.computeSecret(peerPoint));
}

function onCurve<T>(point: Uint8Array, decode: () => T): T {
  if (point.length !== PUBLIC_KEY_LENGTH || point[0] !== 0x04) {
    throw new UserError(`The peer's public key is not an uncompressed P-256 point (got ${point.length} bytes).`);
  }
  try {
    return decode();
  } catch (cause) {
    throw new UserError("The peer's public key is not a point on the P-256 curve.", { cause });
  }
}
