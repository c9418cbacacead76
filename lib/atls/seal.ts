/**
 * Sealing a secret to the other side's ephemeral public key: a compact JWE, ECDH-ES + A256GCM (jose).
 * The exchange is bound into the JWE: apu = the purpose label, apv = the exchange's nonce. Both enter the
 * ECDH-ES key derivation (Concat KDF) and the protected header (the AEAD's additional data), and unseal
 * checks them too, so a sealed message lifted from one exchange is useless in another.
 */
import { UserError } from '../errors.js';
import { importPublicKey, type EcdhPrivateKey } from './keys.js';
import type { Purpose } from './user-data.js';

/** jose loads on first use (it is not needed for `constellation --help`); resolved once, not per message. */
let jose: Promise<typeof import('jose')> | undefined;
const loadJose = () => (jose ??= import('jose'));

const ALG = 'ECDH-ES';
const ENC = 'A256GCM';

export interface ExchangeBinding {
  purpose: Purpose;
  nonce: Uint8Array;
}

export async function seal(plaintext: Uint8Array, recipientPublicKey: Uint8Array, binding: ExchangeBinding): Promise<string> {
  const { CompactEncrypt } = await loadJose();
  return new CompactEncrypt(plaintext)
    .setProtectedHeader({ alg: ALG, enc: ENC })
    .setKeyManagementParameters({ apu: Buffer.from(binding.purpose, 'utf8'), apv: binding.nonce })
    .encrypt(await importPublicKey(recipientPublicKey));
}

/** Opens a sealed message; a UserError (never naming its content) when it is malformed or not bound to this exchange. */
export async function unseal(jwe: string, privateKey: EcdhPrivateKey, binding: ExchangeBinding): Promise<Uint8Array> {
  const { compactDecrypt } = await loadJose();
  let result;
  try {
    result = await compactDecrypt(jwe, privateKey, { keyManagementAlgorithms: [ALG], contentEncryptionAlgorithms: [ENC] });
  } catch (cause) {
    throw new UserError('The sealed message could not be opened: it was not sealed to this exchange\'s key or was altered.', { cause });
  }
  const { apu, apv } = result.protectedHeader;
  if (apu !== Buffer.from(binding.purpose, 'utf8').toString('base64url') || apv !== Buffer.from(binding.nonce).toString('base64url')) {
    throw new UserError('The sealed message belongs to another exchange (purpose or nonce differ).');
  }
  return result.plaintext;
}
