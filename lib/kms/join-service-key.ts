/**
 * The join-service identity key (docs/join-service.md, "Who a joining node trusts"): an Ed25519 key pair with which
 * every genuine join service of a cluster signs the tickets it seals, so that a joining node can tell its cluster's
 * join services from anyone else who can seal to its key (a compromised worker, a fresh node initialized by an
 * attacker).
 *
 * The private key's seed is HKDF(password, "", "key-joinServiceIdentity", 32), where the password is the init secret
 * as its bcrypt hash was made from (the CLI hashes the hex of its 32 random bytes). The CLI, which alone holds the
 * init secret, derives the public key at `create` and hands it to the provider, which publishes it in the nodes'
 * metadata next to the init-secret hash; the first control plane derives the seed once at `init` and keeps only
 * the seed in the cluster store (never the init secret), from which every control plane's join service reads it.
 * Knowing the seed does not reveal the init secret (HKDF is one-way), so no join service can `Init` a node.
 *
 * A signature covers a label, the ticket kind, the joining node's ephemeral public key of this exchange (fresh per
 * attempt, its private half never leaves the node) and the ticket bytes: a signed ticket seen once (by the worker
 * that received it) is useless for any other exchange.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { hkdfSha256 } from './keys.js';

export const JOIN_SERVICE_KEY_SEED_LENGTH = 32;
export const JOIN_SERVICE_PUBLIC_KEY_LENGTH = 32;
const INFO = 'key-joinServiceIdentity';
const SIGNATURE_LABEL = 'constellation join-service ticket v1';
/** PKCS#8 DER of an Ed25519 private key, up to the 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
/** SubjectPublicKeyInfo DER of an Ed25519 public key, up to the 32-byte key (RFC 8410). */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** The seed of the cluster's join-service identity key, from the init secret's password form (what bcrypt hashed). */
export function deriveJoinServiceKeySeed(initSecretPassword: string): Uint8Array {
  return hkdfSha256(Buffer.from(initSecretPassword, 'utf8'), new Uint8Array(0), INFO, JOIN_SERVICE_KEY_SEED_LENGTH);
}

function privateKeyOf(seed: Uint8Array): KeyObject {
  if (seed.length !== JOIN_SERVICE_KEY_SEED_LENGTH)
    throw new Error(`a join-service key seed has ${JOIN_SERVICE_KEY_SEED_LENGTH} bytes, not ${seed.length}`);
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** The raw 32-byte Ed25519 public key of a seed (what the metadata publishes, base64). */
export function joinServicePublicKey(seed: Uint8Array): Uint8Array {
  const spki = createPublicKey(privateKeyOf(seed)).export({ format: 'der', type: 'spki' });
  return new Uint8Array(spki.subarray(SPKI_PREFIX.length));
}

function signedBytes(kind: string, nodePublicKey: Uint8Array, ticket: Uint8Array): Buffer {
  const parts = [Buffer.from(SIGNATURE_LABEL), Buffer.from(kind), nodePublicKey, ticket];
  return Buffer.concat(
    parts.flatMap((part) => {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(part.length);
      return [length, Buffer.from(part)];
    }),
  );
}

/** The join service's signature over a ticket of `kind` for the node whose ephemeral key of this exchange is `nodePublicKey`. */
export function signTicket(seed: Uint8Array, kind: string, nodePublicKey: Uint8Array, ticket: Uint8Array): Uint8Array {
  return new Uint8Array(sign(null, signedBytes(kind, nodePublicKey, ticket), privateKeyOf(seed)));
}

/** Whether `signature` is the cluster's join service's (raw Ed25519 `publicKey`) over this ticket for this exchange. */
export function ticketSignatureValid(
  publicKey: Uint8Array,
  kind: string,
  nodePublicKey: Uint8Array,
  ticket: Uint8Array,
  signature: Uint8Array,
): boolean {
  if (publicKey.length !== JOIN_SERVICE_PUBLIC_KEY_LENGTH) return false;
  try {
    const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
    return verify(null, signedBytes(kind, nodePublicKey, ticket), key, signature);
  } catch {
    return false;
  }
}
