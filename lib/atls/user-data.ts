/**
 * What an attested side binds into its attestation document's userData (docs/design.md#attested-channels step 2): the purpose of
 * the exchange, its ephemeral public key, the verifier's public key and the request fields it wants bound.
 * Each item is written as a 4-byte big-endian length followed by its bytes, then the whole is hashed with
 * SHA-256, so no two different item lists encode alike ("ab"+"c" differs from "a"+"bc").
 * A document made for one purpose ("join") is therefore useless for another ("init").
 */
import { createHash } from 'node:crypto';

export const PURPOSES = ['init', 'join', 'rejoin', 'recover', 'verify'] as const;
export type Purpose = (typeof PURPOSES)[number];

export interface UserDataInput {
  purpose: Purpose;
  /** The attested side's ephemeral ECDH public key (uncompressed SEC1 point); empty where it has none (verify). */
  publicKey: Uint8Array;
  /** The verifier's ephemeral public key; empty where the verifier gets nothing sealed back. */
  verifierPublicKey?: Uint8Array;
  /** Request fields the attested side binds, in a fixed order the service defines (strings are UTF-8). */
  bound?: ReadonlyArray<Uint8Array | string>;
}

export function attestedUserData(input: UserDataInput): Uint8Array {
  const items: Uint8Array[] = [
    Buffer.from(input.purpose, 'utf8'),
    input.publicKey,
    input.verifierPublicKey ?? new Uint8Array(0),
    ...(input.bound ?? []).map((item) => (typeof item === 'string' ? Buffer.from(item, 'utf8') : item)),
  ];
  const hash = createHash('sha256');
  for (const item of items) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(item.length);
    hash.update(length);
    hash.update(item);
  }
  return new Uint8Array(hash.digest());
}
