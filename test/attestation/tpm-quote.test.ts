import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { AttestationError, verifyTpmQuote } from '../../lib/attestation/index.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { gce } from './gce-fixture.js';

const empty = new Uint8Array(0);

describe('verifyTpmQuote on real GCE vTPM evidence', () => {
  for (const hashAlg of [TPM_ALG.SHA256, TPM_ALG.SHA384]) {
    it(`verifies the bank ${hashAlg} quote with empty qualifying data`, () => {
      const q = gce.quote(hashAlg);
      const attest = verifyTpmQuote({ akPublic: gce.akPublic, ...q, qualifyingData: empty });
      assert.deepEqual(attest.quote.pcrSelect, [{ hashAlg, pcrs: [...Array(24).keys()] }]);
      assert.equal(attest.extraData.length, 0);
    });
  }

  it('accepts the PCRs as a plain object as well', () => {
    const q = gce.quote(TPM_ALG.SHA256);
    const pcrs = Object.fromEntries([...q.pcrs].map(([i, v]) => [String(i), v]));
    assert.ok(verifyTpmQuote({ akPublic: gce.akPublic, ...q, pcrs, qualifyingData: empty }));
  });

  const fails = (
    what: string,
    change: (e: ReturnType<typeof gce.quote> & { akPublic: Uint8Array; qualifyingData: Uint8Array }) => void,
    message: RegExp,
  ) =>
    it(`fails when ${what}`, () => {
      const evidence = { akPublic: gce.akPublic.slice(), ...gce.quote(TPM_ALG.SHA256), qualifyingData: empty };
      change(evidence);
      assert.throws(
        () => verifyTpmQuote(evidence),
        (err: unknown) => err instanceof AttestationError && message.test(err.message),
      );
    });

  fails(
    'a PCR value changed',
    (e) => e.pcrs.set(4, new Uint8Array(32)),
    /PCR values do not match the quote's PCR digest/,
  );
  fails('a PCR is missing', (e) => e.pcrs.delete(23), /values were given for PCRs/);
  fails('a byte of the quote changed', (e) => (e.quote[e.quote.length - 5] ^= 1), /signature does not verify/);
  fails('a byte of the signature changed', (e) => (e.signature[20] ^= 1), /signature does not verify/);
  fails('the qualifying data differs', (e) => (e.qualifyingData = new Uint8Array(32)), /other qualifying data/);
  fails('the bank is another than quoted', (e) => (e.hashAlg = TPM_ALG.SHA384), /not PCRs of the sha384 bank alone/);
  fails('another key is given', (e) => (e.akPublic[e.akPublic.length - 3] ^= 1), /signature does not verify/);
  fails('the AK is not a restricted key', (e) => (e.akPublic[5] &= ~0x01), /not a restricted signing key/);
  fails('the AK is garbage', (e) => (e.akPublic = new Uint8Array([0, 1, 0])), /Malformed attestation key/);
  fails(
    'the quote is truncated',
    (e) => (e.quote = e.quote.subarray(0, 40)),
    /signature does not verify|Malformed quote/,
  );
});
