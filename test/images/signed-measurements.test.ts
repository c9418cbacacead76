import assert from 'node:assert/strict';
import { UserError } from '../../lib/errors.js';
import { verifyBlob } from '../../lib/images/cosign-signature.js';
import {
  encodeMeasurementsFile,
  SignatureError,
  signMeasurementsFile,
  verifyMeasurementsFile,
  type SignedMeasurements,
} from '../../lib/images/signed-measurements.js';
import { measurementsOf, testSigner } from './support.js';

const V2: SignedMeasurements = { version: 'v2', variant: 'local-vtpm', measurements: measurementsOf('aa') };

describe('signed measurements files', () => {
  const signer = testSigner();

  it('are JSON {version, variant, measurements} with PCRs in ascending order and a final newline', () => {
    const text = encodeMeasurementsFile({
      ...V2,
      measurements: {
        '11': { expected: 'AB'.repeat(32), warnOnly: false },
        '4': { expected: 'cd'.repeat(32), warnOnly: true },
      },
    }).toString();
    assert.equal(
      text,
      `{\n  "version": "v2",\n  "variant": "local-vtpm",\n  "measurements": {\n    "4": {\n      "expected": "${'cd'.repeat(32)}",\n      "warnOnly": true\n    },\n    "11": {\n      "expected": "${'ab'.repeat(32)}",\n      "warnOnly": false\n    }\n  }\n}\n`,
    );
  });

  it('verify with the signing key and give back what was signed; the signature is over the exact file bytes', () => {
    const { file, signature } = signMeasurementsFile(V2, signer.privateKey);
    assert.equal(verifyBlob(signer.trusted.key, file, signature), true);
    assert.deepEqual(
      verifyMeasurementsFile({
        file,
        signature,
        key: signer.trusted,
        source: 'x',
        expect: { version: 'v2', variant: 'local-vtpm' },
      }),
      V2,
    );
  });

  describe('are refused', () => {
    const { file, signature } = signMeasurementsFile(V2, signer.privateKey);
    const verify = (overrides: Partial<Parameters<typeof verifyMeasurementsFile>[0]>) =>
      verifyMeasurementsFile({
        file,
        signature,
        key: signer.trusted,
        source: 'https://example.test/m.json',
        ...overrides,
      });
    const edited = (from: string, to: string) => Buffer.from(file.toString().replace(from, to));

    const signatureCases: [string, Partial<Parameters<typeof verifyMeasurementsFile>[0]>][] = [
      ['a PCR value edited after signing', { file: edited('aaaa', 'aaab') }],
      ['warnOnly flipped after signing', { file: edited('"warnOnly": false', '"warnOnly": true') }],
      [
        'white space added after signing (the bytes are signed, not the JSON)',
        { file: Buffer.concat([file, Buffer.from('\n')]) },
      ],
      ['an edit that also breaks the JSON (the signature is checked first)', { file: edited('{', '') }],
      ['a signature by another key', { key: testSigner('another key').trusted }],
      ['a signature that is not base64', { signature: 'not a signature' }],
    ];
    for (const [name, overrides] of signatureCases) {
      it(`as not signed: ${name}`, () => {
        assert.throws(
          () => verify(overrides),
          (err: Error) =>
            err instanceof SignatureError &&
            err.message.startsWith('The measurements https://example.test/m.json do not verify with ') &&
            /changed after it was signed, or it was signed with another key/.test(err.message) &&
            /^Nothing was changed\./.test((err as SignatureError).hint ?? ''),
        );
      });
    }

    it('when signed but not a measurements file, naming what is wrong', () => {
      const bad = signMeasurementsFile(
        { ...V2, measurements: { '24': { expected: '00'.repeat(32), warnOnly: false } } },
        signer.privateKey,
      );
      assert.throws(
        () => verify(bad),
        (err: Error) =>
          err instanceof UserError &&
          !(err instanceof SignatureError) &&
          /are signed but not a measurements file \(measurements\.24:/.test(err.message),
      );
    });

    it('when signed for another version than the one asked for', () => {
      assert.throws(() => verify({ expect: { version: 'v3' } }), /are signed for image v2, not for v3/);
    });

    it('when signed for another attestation variant than the config', () => {
      assert.throws(
        () => verify({ expect: { variant: 'gcp-sev-snp' } }),
        /are for attestation variant local-vtpm, not for gcp-sev-snp/,
      );
    });
  });
});
