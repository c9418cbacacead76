import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { attestedUserData } from '../../lib/atls/index.js';

describe('atls/user-data', () => {
  const key = new Uint8Array(65).fill(4);

  it('hashes length-prefixed items: purpose, public key, verifier key, bound fields', () => {
    const expected = createHash('sha256')
      .update(Buffer.from([0, 0, 0, 4]))
      .update('join')
      .update(Buffer.from([0, 0, 0, 65]))
      .update(key)
      .update(Buffer.from([0, 0, 0, 0]))
      .update(Buffer.from([0, 0, 0, 3]))
      .update('abc')
      .digest();
    assert.deepEqual(Buffer.from(attestedUserData({ purpose: 'join', publicKey: key, bound: ['abc'] })), expected);
  });

  it('is unambiguous: moving bytes between items changes the result', () => {
    const a = attestedUserData({ purpose: 'join', publicKey: key, bound: ['ab', 'c'] });
    const b = attestedUserData({ purpose: 'join', publicKey: key, bound: ['a', 'bc'] });
    assert.notDeepEqual(a, b);
  });

  it('differs by purpose, key and verifier key', () => {
    const base = Buffer.from(attestedUserData({ purpose: 'init', publicKey: key })).toString('hex');
    const others = [
      attestedUserData({ purpose: 'recover', publicKey: key }),
      attestedUserData({ purpose: 'init', publicKey: new Uint8Array(65).fill(5) }),
      attestedUserData({ purpose: 'init', publicKey: key, verifierPublicKey: key }),
    ].map((d) => Buffer.from(d).toString('hex'));
    for (const other of others) assert.notEqual(other, base);
    assert.equal(new Set(others).size, others.length);
  });
});
