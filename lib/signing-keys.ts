/**
 * The ECDSA P-256 keys that sign measurements (lib/images/cosign-signature.ts signs and verifies with them): made
 * here, read from PEM ("PUBLIC KEY" SubjectPublicKeyInfo as cosign.pub, plain PKCS#8 "PRIVATE KEY"), named for
 * messages and fingerprinted. Only P-256 is accepted: the one curve the measurements' supply chain uses. A module of
 * its own because the config validates its measurementsSigningKey with it, below everything that verifies.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { UserError } from './errors.js';

/** A public key that signatures are checked with, and how messages name it. */
export interface TrustedKey {
  key: KeyObject;
  /** Where the key comes from, for messages: "the release key of this CLI", "the config's measurementsSigningKey". */
  name: string;
  /** SHA-256 of the key's SubjectPublicKeyInfo (DER), hex: what `openssl pkey -pubin -outform DER | sha256sum` prints. */
  fingerprint: string;
}

export interface SigningKeyPair {
  /** PKCS#8 PEM. A secret: never logged, written 0600. */
  privateKeyPem: string;
  /** SubjectPublicKeyInfo PEM ("PUBLIC KEY"), as cosign.pub. */
  publicKeyPem: string;
}

function requireP256(key: KeyObject, what: string): void {
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    const actual =
      key.asymmetricKeyType === 'ec'
        ? `EC on ${key.asymmetricKeyDetails?.namedCurve}`
        : key.asymmetricKeyType?.toUpperCase();
    throw new UserError(
      `${what} is not an ECDSA P-256 key (it is ${actual}); measurements are signed with P-256 keys only.`,
      {
        hint: 'Use a P-256 key, e.g. one made by `cosign generate-key-pair` or `openssl ecparam -name prime256v1 -genkey`.',
      },
    );
  }
}

/** Parses a PEM public key (SubjectPublicKeyInfo) and checks that it is P-256. `name` says where it comes from. */
export function trustedKeyFromPem(pem: string, name: string): TrustedKey {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: 'pem' });
  } catch (err) {
    throw new UserError(`${name} is not a PEM public key.`, {
      hint: 'Give the public key as PEM: "-----BEGIN PUBLIC KEY-----" ... "-----END PUBLIC KEY-----" (cosign.pub has this format).',
      cause: err,
    });
  }
  requireP256(key, name);
  return { key, name, fingerprint: keyFingerprint(key) };
}

/** Hex SHA-256 of the public key's DER SubjectPublicKeyInfo. */
export function keyFingerprint(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  return createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

/** A new P-256 key pair: PKCS#8 private key and SPKI public key, both PEM. */
export function generateSigningKeyPair(): SigningKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

/** Parses a PKCS#8 PEM private key and checks that it is P-256. The key never appears in the error. */
export function privateKeyFromPem(pem: string, where: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    // The cause would quote OpenSSL, never the key; still, keep it out of the message.
    throw new UserError(`${where} is not a PEM private key.`, {
      hint: 'It must be an unencrypted PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----").',
      cause: err,
    });
  }
  requireP256(key, where);
  return key;
}
