import assert from 'node:assert/strict';
import { randomBytes, webcrypto } from 'node:crypto';
import { CompactEncrypt, compactDecrypt } from 'jose';
import { checkPublicKey, generateEphemeralKeyPair, seal, unseal } from '../../lib/atls/index.js';
import { UserError } from '../../lib/errors.js';

const ECDH_P256 = { name: 'ECDH', namedCurve: 'P-256' } as const;

/** A JWE made by jose (the reference implementation) the way docs/design.md#attested-channels fixes it. */
async function joseSeal(
  plaintext: Uint8Array,
  recipient: Uint8Array,
  purpose: string,
  nonce: Uint8Array,
): Promise<string> {
  const key = await webcrypto.subtle.importKey('raw', recipient, ECDH_P256, true, []);
  return new CompactEncrypt(plaintext)
    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM' })
    .setKeyManagementParameters({ apu: Buffer.from(purpose, 'utf8'), apv: nonce })
    .encrypt(key);
}

describe('atls/keys and seal', () => {
  const nonce = randomBytes(32);
  const secret = Buffer.from('master secret bytes');

  it('makes a fresh 65-byte uncompressed P-256 point per key pair, which the checker accepts', () => {
    const { publicKey } = generateEphemeralKeyPair();
    assert.equal(publicKey.length, 65);
    assert.equal(publicKey[0], 0x04);
    assert.notDeepEqual(generateEphemeralKeyPair().publicKey, publicKey);
    checkPublicKey(publicKey);
  });

  it('refuses a point of the wrong size or off the curve', () => {
    assert.throws(() => checkPublicKey(new Uint8Array(33)), UserError);
    const { publicKey } = generateEphemeralKeyPair();
    const off = Buffer.from(publicKey);
    off[64] ^= 1;
    assert.throws(() => checkPublicKey(off), /not a point on the P-256 curve/);
    assert.throws(() => seal(secret, off, { purpose: 'init', nonce }), /not a point on the P-256 curve/);
  });

  it('seals as a compact ECDH-ES/A256GCM JWE that only the recipient opens', () => {
    const recipient = generateEphemeralKeyPair();
    const jwe = seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    const header = JSON.parse(Buffer.from(jwe.split('.')[0], 'base64url').toString()) as Record<string, string>;
    assert.equal(header.alg, 'ECDH-ES');
    assert.equal(header.enc, 'A256GCM');
    assert.equal(header.apv, nonce.toString('base64url'));
    assert.equal(jwe.split('.')[1], '', 'ECDH-ES direct agreement carries no encrypted key');
    assert.deepEqual(Buffer.from(unseal(jwe, recipient.privateKey, { purpose: 'init', nonce })), secret);
    const other = generateEphemeralKeyPair();
    assert.throws(() => unseal(jwe, other.privateKey, { purpose: 'init', nonce }), /could not be opened/);
  });

  it('uses a fresh ephemeral key and IV for every seal', () => {
    const recipient = generateEphemeralKeyPair();
    const [a, b] = [
      seal(secret, recipient.publicKey, { purpose: 'init', nonce }),
      seal(secret, recipient.publicKey, { purpose: 'init', nonce }),
    ];
    const epk = (jwe: string) =>
      (JSON.parse(Buffer.from(jwe.split('.')[0], 'base64url').toString()) as { epk: { x: string } }).epk.x;
    assert.notEqual(epk(a), epk(b));
    assert.notEqual(a.split('.')[2], b.split('.')[2]);
  });

  it('opens what jose sealed, and jose opens what it sealed (the format docs/design.md#attested-channels fixes)', async () => {
    const recipient = generateEphemeralKeyPair();
    const fromJose = await joseSeal(secret, recipient.publicKey, 'join', nonce);
    assert.deepEqual(Buffer.from(unseal(fromJose, recipient.privateKey, { purpose: 'join', nonce })), secret);

    const pair = (await webcrypto.subtle.generateKey(ECDH_P256, true, ['deriveBits'])) as webcrypto.CryptoKeyPair;
    const point = new Uint8Array(await webcrypto.subtle.exportKey('raw', pair.publicKey));
    const ours = seal(secret, point, { purpose: 'join', nonce });
    const opened = await compactDecrypt(ours, pair.privateKey, {
      keyManagementAlgorithms: ['ECDH-ES'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
    assert.deepEqual(Buffer.from(opened.plaintext), secret);
    assert.equal(opened.protectedHeader.apu, Buffer.from('join').toString('base64url'));
    assert.equal(opened.protectedHeader.apv, nonce.toString('base64url'));
  });

  it('refuses a sealed message from another exchange (nonce or purpose)', () => {
    const recipient = generateEphemeralKeyPair();
    const jwe = seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    assert.throws(
      () => unseal(jwe, recipient.privateKey, { purpose: 'init', nonce: randomBytes(32) }),
      /another exchange/,
    );
    assert.throws(() => unseal(jwe, recipient.privateKey, { purpose: 'recover', nonce }), /another exchange/);
  });

  it('refuses a sealed message whose header was altered', () => {
    const recipient = generateEphemeralKeyPair();
    const jwe = seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    const [encoded, ...rest] = jwe.split('.');
    const forged = Buffer.from(
      JSON.stringify({
        alg: 'ECDH-ES',
        enc: 'A256GCM',
        apu: Buffer.from('init').toString('base64url'),
        apv: randomBytes(32).toString('base64url'),
      }),
    ).toString('base64url');
    assert.throws(
      () => unseal([forged, ...rest].join('.'), recipient.privateKey, { purpose: 'init', nonce }),
      UserError,
    );
    // The same header fields re-encoded (other whitespace): the header is authenticated byte for byte.
    const header = JSON.parse(Buffer.from(encoded, 'base64url').toString()) as object;
    const reencoded = Buffer.from(JSON.stringify(header, null, 1)).toString('base64url');
    assert.throws(
      () => unseal([reencoded, ...rest].join('.'), recipient.privateKey, { purpose: 'init', nonce }),
      /could not be opened/,
    );
  });

  it('refuses other algorithms, extensions, a private epk and a bad IV or tag', () => {
    const recipient = generateEphemeralKeyPair();
    const jwe = seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    const parts = jwe.split('.');
    const header = JSON.parse(Buffer.from(parts[0], 'base64url').toString()) as Record<string, unknown>;
    const withHeader = (h: Record<string, unknown>) =>
      [Buffer.from(JSON.stringify(h)).toString('base64url'), ...parts.slice(1)].join('.');
    const open = (token: string) => () => unseal(token, recipient.privateKey, { purpose: 'init', nonce });
    assert.throws(open(withHeader({ ...header, enc: 'A128GCM' })), /not ECDH-ES with A256GCM/);
    assert.throws(open(withHeader({ ...header, alg: 'ECDH-ES+A256KW' })), /not ECDH-ES with A256GCM/);
    assert.throws(open(withHeader({ ...header, crit: ['exp'] })), /extension or compression/);
    assert.throws(open(withHeader({ ...header, zip: 'DEF' })), /extension or compression/);
    assert.throws(
      open(withHeader({ ...header, epk: { ...(header.epk as object), d: 'AAAA' } })),
      /not a public P-256 key/,
    );
    assert.throws(
      open(withHeader({ ...header, epk: { ...(header.epk as object), crv: 'P-384' } })),
      /not a public P-256 key/,
    );
    assert.throws(open([parts[0], 'AAAA', ...parts.slice(2)].join('.')), /no encrypted key/);
    assert.throws(open([...parts.slice(0, 2), 'AAAA', ...parts.slice(3)].join('.')), /IV or tag/);
    assert.throws(open([...parts.slice(0, 4), parts[4].slice(0, 10)].join('.')), /IV or tag/);
    assert.throws(open(`${jwe}.`), /not a compact JWE/);
    assert.throws(open(jwe.replace('..', '.+.')), /not a compact JWE/);
  });

  it('refuses an altered ciphertext or tag without naming the content', () => {
    const recipient = generateEphemeralKeyPair();
    const parts = seal(secret, recipient.publicKey, { purpose: 'init', nonce }).split('.');
    const flip = (part: string) => {
      const bytes = Buffer.from(part, 'base64url');
      bytes[0] ^= 1;
      return bytes.toString('base64url');
    };
    for (const index of [3, 4]) {
      const altered = parts.map((p, i) => (i === index ? flip(p) : p)).join('.');
      assert.throws(
        () => unseal(altered, recipient.privateKey, { purpose: 'init', nonce }),
        (err: Error) =>
          err instanceof UserError &&
          /could not be opened/.test(err.message) &&
          !err.message.includes(secret.toString()),
      );
    }
  });
});
