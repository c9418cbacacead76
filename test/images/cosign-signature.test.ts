import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPrivateKey, createPublicKey, generateKeyPairSync, webcrypto } from 'node:crypto';
import { children, readOnly, TAG } from '../../lib/der.js';
import { UserError } from '../../lib/errors.js';
import { decodeSignature, signBlob, verifyBlob } from '../../lib/images/cosign-signature.js';
import {
  generateSigningKeyPair,
  keyFingerprint,
  privateKeyFromPem,
  trustedKeyFromPem,
} from '../../lib/signing-keys.js';
import { RELEASE_MEASUREMENTS_PUBLIC_KEY, releaseKey } from '../../lib/images/release-key.js';
import { COSIGN_RELEASE_PUBLIC_KEY, DSSE, SIGN_BLOB } from './cosign-vectors.js';

/** The fixed 26-byte SubjectPublicKeyInfo header of every P-256 key (id-ecPublicKey, prime256v1, BIT STRING). */
const P256_SPKI_HEADER = '3059301306072a8648ce3d020106082a8648ce3d030107034200';

/** DSSE's pre-authentication encoding: what cosign signs for an attestation. */
function pae(type: string, payload: string): Buffer {
  return Buffer.from(`DSSEv1 ${Buffer.byteLength(type)} ${type} ${Buffer.byteLength(payload)} ${payload}`);
}

/** r ‖ s, each 32 bytes: the IEEE P1363 form WebCrypto verifies, converted from the DER signature by hand. */
function derToP1363(der: Buffer): Buffer {
  const parts = children(readOnly(der, TAG.SEQUENCE, 'signature'));
  assert.equal(parts.length, 2);
  return Buffer.concat(
    parts.map((p) => {
      assert.equal(p.tag, TAG.INTEGER);
      const magnitude = p.content[0] === 0 ? p.content.subarray(1) : p.content;
      return Buffer.concat([Buffer.alloc(32 - magnitude.length), magnitude]);
    }),
  );
}

describe('cosign blob signatures (ECDSA P-256, SHA-256, DER, base64)', () => {
  describe('signatures made by cosign (Sigstore Go)', () => {
    it('verifies a cosign sign-blob signature with its public key', () => {
      const key = trustedKeyFromPem(SIGN_BLOB.publicKey, 'test key');
      assert.equal(verifyBlob(key.key, Buffer.from(SIGN_BLOB.content), SIGN_BLOB.signature), true);
    });

    it('refuses it for other content, for another key, and when a signature byte changes', () => {
      const key = trustedKeyFromPem(SIGN_BLOB.publicKey, 'test key');
      const other = trustedKeyFromPem(SIGN_BLOB.otherPublicKey, 'other key');
      assert.equal(
        verifyBlob(key.key, Buffer.from('This is some completely different content!\n'), SIGN_BLOB.signature),
        false,
      );
      assert.equal(verifyBlob(other.key, Buffer.from(SIGN_BLOB.content), SIGN_BLOB.signature), false);
      const der = decodeSignature(SIGN_BLOB.signature)!;
      der[der.length - 1] ^= 1;
      assert.equal(verifyBlob(key.key, Buffer.from(SIGN_BLOB.content), der.toString('base64')), false);
    });

    it("verifies cosign's own test signature over a DSSE envelope", () => {
      const key = trustedKeyFromPem(DSSE.publicKey, 'cosign test key');
      assert.equal(verifyBlob(key.key, pae(DSSE.payloadType, DSSE.payload), DSSE.signature), true);
      assert.equal(verifyBlob(key.key, Buffer.from(DSSE.payload), DSSE.signature), false);
    });

    it("reads cosign's release key: the same P-256 key format we write", () => {
      const key = trustedKeyFromPem(COSIGN_RELEASE_PUBLIC_KEY, 'cosign release key');
      assert.ok(key.key.export({ type: 'spki', format: 'der' }).toString('hex').startsWith(P256_SPKI_HEADER));
    });
  });

  describe('signatures we make', () => {
    it('are base64 of a DER SEQUENCE {r, s} that an independent ECDSA verifier (WebCrypto, P1363) accepts', async () => {
      const pair = generateSigningKeyPair();
      const data = Buffer.from('{"version":"v1"}\n');
      const signature = signBlob(privateKeyFromPem(pair.privateKeyPem, 'key'), data);
      assert.match(
        signature,
        /^[A-Za-z0-9+/]+={0,2}$/,
        'one line of standard base64, no newline (cosign sign-blob output)',
      );
      const der = Buffer.from(signature, 'base64');
      const subtleKey = await webcrypto.subtle.importKey(
        'spki',
        createPublicKey(pair.publicKeyPem).export({ type: 'spki', format: 'der' }),
        { name: 'ECDSA', namedCurve: 'P-256' },
        false,
        ['verify'],
      );
      assert.equal(
        await webcrypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, subtleKey, derToP1363(der), data),
        true,
      );
      assert.equal(
        await webcrypto.subtle.verify(
          { name: 'ECDSA', hash: 'SHA-256' },
          subtleKey,
          derToP1363(der),
          Buffer.from('other'),
        ),
        false,
      );
    });

    it('verify with openssl, an independent tool, given the public key file and the decoded signature', async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-sig-'));
      try {
        const pair = generateSigningKeyPair();
        const data = Buffer.from('{"version":"v1"}\n');
        await fs.writeFile(path.join(dir, 'key.pub'), pair.publicKeyPem);
        await fs.writeFile(path.join(dir, 'measurements.json'), data);
        await fs.writeFile(
          path.join(dir, 'sig.der'),
          Buffer.from(signBlob(privateKeyFromPem(pair.privateKeyPem, 'key'), data), 'base64'),
        );
        const out = execFileSync(
          'openssl',
          ['dgst', '-sha256', '-verify', 'key.pub', '-signature', 'sig.der', 'measurements.json'],
          { cwd: dir, encoding: 'utf8' },
        );
        assert.equal(out.trim(), 'Verified OK');
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    });

    it('write keys as cosign.pub (SPKI "PUBLIC KEY" PEM) and as plain PKCS#8 "PRIVATE KEY" PEM', () => {
      const pair = generateSigningKeyPair();
      assert.match(pair.publicKeyPem, /^-----BEGIN PUBLIC KEY-----\n[\s\S]+\n-----END PUBLIC KEY-----\n$/);
      assert.match(pair.privateKeyPem, /^-----BEGIN PRIVATE KEY-----\n/);
      const spki = createPublicKey(pair.publicKeyPem).export({ type: 'spki', format: 'der' });
      assert.equal(spki.length, 91);
      assert.ok(spki.toString('hex').startsWith(P256_SPKI_HEADER));
      assert.equal(createPrivateKey(pair.privateKeyPem).asymmetricKeyDetails?.namedCurve, 'prime256v1');
    });

    it('verify with the public key in PEM, as cosign verify-blob --key would', () => {
      const pair = generateSigningKeyPair();
      const data = Buffer.from('measurements');
      const signature = signBlob(privateKeyFromPem(pair.privateKeyPem, 'key'), data);
      const key = trustedKeyFromPem(pair.publicKeyPem, 'key');
      assert.equal(verifyBlob(key.key, data, signature), true);
      assert.equal(
        verifyBlob(key.key, data, `${signature}\n`),
        true,
        'a trailing newline (a signature file saved by an editor) is ignored',
      );
      assert.equal(verifyBlob(key.key, data, Buffer.from(signature)), true);
    });
  });

  it('refuses signatures that are not base64 rather than guessing', () => {
    const key = trustedKeyFromPem(SIGN_BLOB.publicKey, 'test key');
    for (const bad of ['', 'not base64!', '@@@@', 'MEUC IQ==']) {
      assert.equal(verifyBlob(key.key, Buffer.from(SIGN_BLOB.content), bad), false, JSON.stringify(bad));
    }
  });

  it('accepts only P-256 public keys, and names the key in the refusal', () => {
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({
      type: 'spki',
      format: 'pem',
    }) as string;
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
      type: 'spki',
      format: 'pem',
    }) as string;
    assert.throws(
      () => trustedKeyFromPem(p384, 'the key in the test'),
      (err: UserError) =>
        err instanceof UserError &&
        /the key in the test is not an ECDSA P-256 key \(it is EC on secp384r1\)/.test(err.message),
    );
    assert.throws(() => trustedKeyFromPem(rsa, 'the key'), /is not an ECDSA P-256 key \(it is RSA\)/);
    assert.throws(
      () => trustedKeyFromPem('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n', 'the key'),
      /the key is not a PEM public key/,
    );
  });

  it('fingerprints a key as SHA-256 of its SPKI DER, the same from its private or public half', () => {
    const pair = generateSigningKeyPair();
    const fromPublic = trustedKeyFromPem(pair.publicKeyPem, 'k').fingerprint;
    assert.match(fromPublic, /^[0-9a-f]{64}$/);
    assert.equal(keyFingerprint(createPrivateKey(pair.privateKeyPem)), fromPublic);
  });

  it('pins a release key that is a P-256 public key, with the fingerprint its comment states', () => {
    const key = releaseKey();
    assert.equal(key.name, 'the release key of this CLI');
    assert.ok(RELEASE_MEASUREMENTS_PUBLIC_KEY.startsWith('-----BEGIN PUBLIC KEY-----\n'));
    assert.equal(key.fingerprint, '8d03cd76740d9e06d3fe0a86d2c7599bdc972ce7b8ac41277ccb7b9182fb6b53');
    assert.equal(
      verifyBlob(key.key, Buffer.from(SIGN_BLOB.content), SIGN_BLOB.signature),
      false,
      'a signature by another key never verifies with it',
    );
  });
});
