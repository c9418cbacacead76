import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSelfSignedCertificate } from '../../lib/atls/self-signed.js';

describe('atls/self-signed', () => {
  it('makes a self-signed ECDSA P-256 certificate for its key, valid from a minute before `now` for `validDays`', async () => {
    const now = new Date('2024-05-01T12:00:00Z');
    const { cert, key } = await createSelfSignedCertificate('constellation', now, 30);
    const parsed = new X509Certificate(cert); // OpenSSL reads it
    assert.equal(parsed.subject, 'CN=constellation');
    assert.equal(parsed.issuer, 'CN=constellation');
    assert.ok(parsed.verify(parsed.publicKey), 'signed by its own key');
    assert.ok(parsed.checkPrivateKey(createPrivateKey(key)), 'the PEM key is the certified key');
    assert.equal(parsed.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    assert.equal(new Date(parsed.validFrom).toISOString(), '2024-05-01T11:59:00.000Z');
    assert.equal(new Date(parsed.validTo).toISOString(), '2024-05-31T12:00:00.000Z');
    assert.equal(parsed.ca, false);
  });

  it('gives every certificate its own key and serial number', async () => {
    const [a, b] = await Promise.all([createSelfSignedCertificate('x'), createSelfSignedCertificate('x')]);
    assert.notEqual(new X509Certificate(a.cert).serialNumber, new X509Certificate(b.cert).serialNumber);
    assert.notEqual(a.key, b.key);
  });
});
