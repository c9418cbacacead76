import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { generateEphemeralKeyPair, importPublicKey, seal, unseal } from '../../lib/atls/index.js';
import { UserError } from '../../lib/errors.js';

describe('atls/keys and seal', () => {
  const nonce = randomBytes(32);
  const secret = Buffer.from('master secret bytes');

  it('exports public keys as 65-byte uncompressed points and imports them back', async () => {
    const { publicKey } = await generateEphemeralKeyPair();
    assert.equal(publicKey.length, 65);
    assert.equal(publicKey[0], 0x04);
    assert.equal(((await importPublicKey(publicKey)).algorithm as { namedCurve?: string }).namedCurve, 'P-256');
  });

  it('refuses a point of the wrong size or off the curve', async () => {
    await assert.rejects(importPublicKey(new Uint8Array(33)), UserError);
    const { publicKey } = await generateEphemeralKeyPair();
    const off = Buffer.from(publicKey);
    off[64] ^= 1;
    await assert.rejects(importPublicKey(off), /not a point on the P-256 curve/);
  });

  it('seals as a compact ECDH-ES/A256GCM JWE that only the recipient opens', async () => {
    const recipient = await generateEphemeralKeyPair();
    const jwe = await seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    const header = JSON.parse(Buffer.from(jwe.split('.')[0], 'base64url').toString()) as Record<string, string>;
    assert.equal(header.alg, 'ECDH-ES');
    assert.equal(header.enc, 'A256GCM');
    assert.equal(header.apv, nonce.toString('base64url'));
    assert.deepEqual(Buffer.from(await unseal(jwe, recipient.privateKey, { purpose: 'init', nonce })), secret);
    const other = await generateEphemeralKeyPair();
    await assert.rejects(unseal(jwe, other.privateKey, { purpose: 'init', nonce }), /could not be opened/);
  });

  it('refuses a sealed message from another exchange (nonce or purpose)', async () => {
    const recipient = await generateEphemeralKeyPair();
    const jwe = await seal(secret, recipient.publicKey, { purpose: 'init', nonce });
    await assert.rejects(unseal(jwe, recipient.privateKey, { purpose: 'init', nonce: randomBytes(32) }), /another exchange/);
    await assert.rejects(unseal(jwe, recipient.privateKey, { purpose: 'recover', nonce }), /another exchange/);
  });

  it('refuses a sealed message whose header was altered', async () => {
    const recipient = await generateEphemeralKeyPair();
    const [, ...rest] = (await seal(secret, recipient.publicKey, { purpose: 'init', nonce })).split('.');
    const forged = Buffer.from(JSON.stringify({ alg: 'ECDH-ES', enc: 'A256GCM', apu: Buffer.from('init').toString('base64url'), apv: randomBytes(32).toString('base64url') })).toString('base64url');
    await assert.rejects(unseal([forged, ...rest].join('.'), recipient.privateKey, { purpose: 'init', nonce }), UserError);
  });
});
