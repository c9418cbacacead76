/**
 * Ephemeral ECDH P-256 key pairs for one exchange, as WebCrypto keys (what jose works with natively; a
 * node:crypto KeyObject would be converted on every seal). Public keys travel as uncompressed SEC1 points
 * (0x04 ‖ X ‖ Y, 65 bytes); importing one checks that it is a point on the curve, so a malformed key is
 * refused before anything is sealed to it.
 */
import { webcrypto } from 'node:crypto';
import { UserError } from '../errors.js';

export const PUBLIC_KEY_LENGTH = 65;
const ECDH_P256 = { name: 'ECDH', namedCurve: 'P-256' } as const;

export type EcdhPrivateKey = webcrypto.CryptoKey;
export type EcdhPublicKey = webcrypto.CryptoKey;

export interface EphemeralKeyPair {
  privateKey: EcdhPrivateKey;
  /** Uncompressed SEC1 point, 65 bytes. */
  publicKey: Uint8Array;
}

export async function generateEphemeralKeyPair(): Promise<EphemeralKeyPair> {
  const pair = (await webcrypto.subtle.generateKey(ECDH_P256, false, ['deriveBits'])) as webcrypto.CryptoKeyPair;
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await webcrypto.subtle.exportKey('raw', pair.publicKey)) };
}

/** Imports a peer's public key; a UserError when it is not an uncompressed P-256 point on the curve. */
export async function importPublicKey(point: Uint8Array): Promise<EcdhPublicKey> {
  if (point.length !== PUBLIC_KEY_LENGTH || point[0] !== 0x04) {
    throw new UserError(`The peer's public key is not an uncompressed P-256 point (got ${point.length} bytes).`);
  }
  try {
    return await webcrypto.subtle.importKey('raw', point, ECDH_P256, true, []);
  } catch (cause) {
    throw new UserError("The peer's public key is not a point on the P-256 curve.", { cause });
  }
}
