import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'mocha';
import {
  AttestationError,
  createVtpmValidator,
  VtpmIssuer,
  type AttestationDocument,
  type Measurements,
  type VtpmAttestation,
} from '../../lib/attestation/index.js';
import { IMAGE_PCRS } from '../../lib/attestation/measurements.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { startTestTpm, type TestTpm } from '../tpm/support.js';

const enc = new TextEncoder();

describe('vTPM issuer and validator (docs/design.md#attestation) with a real swtpm', () => {
  let tpm: TestTpm;
  let client: TpmClient;
  let issuer: VtpmIssuer;
  let ak: Uint8Array;
  let pcrs256: Map<number, Uint8Array>;
  let pcrs384: Map<number, Uint8Array>;
  const instanceInfo = enc.encode('{"instance":"node-1"}');

  before(async () => {
    tpm = await startTestTpm('vtpm-validator-');
    client = await TpmClient.connect(tpm.swtpm.serverSocket);
    for (const [i, fill] of [
      [4, 1],
      [9, 2],
      [11, 3],
    ] as const) {
      await client.pcrExtend(i, [
        { hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(32).fill(fill) },
        { hashAlg: TPM_ALG.SHA384, digest: new Uint8Array(48).fill(fill) },
      ]);
    }
    issuer = new VtpmIssuer({
      variant: 'test-vtpm',
      tpm: client,
      instanceInfo,
      banks: [TPM_ALG.SHA256, TPM_ALG.SHA384],
    });
    const key = await client.createAttestationKey();
    ak = key.publicArea;
    await client.flushContext(key.handle);
    pcrs256 = await client.pcrRead(TPM_ALG.SHA256, [...Array(24).keys()]);
    pcrs384 = await client.pcrRead(TPM_ALG.SHA384, [...Array(24).keys()]);
  });
  after(async () => {
    client?.close();
    await tpm?.cleanup();
  });

  // Every image PCR enforced (a validator refuses less), plus the PCRs a case names, with its warnOnly.
  const measure = (pcrs: Map<number, Uint8Array>, indices: number[], warnOnly = false): Measurements => ({
    ...Object.fromEntries(
      IMAGE_PCRS.map((i) => [
        String(i),
        { expected: Buffer.from(pcrs.get(i) ?? pcrs256.get(i)!).toString('hex'), warnOnly: false },
      ]),
    ),
    ...Object.fromEntries(
      indices.map((i) => [String(i), { expected: Buffer.from(pcrs.get(i)!).toString('hex'), warnOnly }]),
    ),
  });

  const trustOurAk = async (akPublic: Uint8Array) => {
    if (Buffer.compare(akPublic, ak) !== 0) throw new AttestationError('unknown AK');
  };

  const validator = (measurements: Measurements, warnings: string[] = []) =>
    createVtpmValidator({
      variant: 'test-vtpm',
      measurements,
      trustAk: trustOurAk,
      deps: { warn: (m) => warnings.push(m) },
    });

  async function fresh(): Promise<{ doc: AttestationDocument; nonce: Uint8Array; userData: Uint8Array }> {
    const nonce = randomBytes(32);
    const userData = enc.encode('purpose:join');
    return { doc: await issuer.issue(userData, nonce), nonce, userData };
  }

  const vtpm = (doc: AttestationDocument) => doc.attestation as VtpmAttestation;
  const rejects = (p: Promise<unknown>, message: RegExp) =>
    assert.rejects(p, (err: unknown) => {
      assert.ok(err instanceof AttestationError, String(err));
      assert.match(err.message, message);
      return true;
    });

  it('accepts a fresh document and returns the verified PCRs and the user data', async () => {
    const { doc, nonce, userData } = await fresh();
    assert.equal(doc.variant, 'test-vtpm');
    assert.deepEqual(
      vtpm(doc).quotes.map((q) => q.hashAlg),
      [TPM_ALG.SHA256, TPM_ALG.SHA384],
    );
    const result = await validator(measure(pcrs256, [4, 9, 11, 12, 15])).validate(doc, nonce);
    assert.deepEqual(result.userData, userData);
    assert.equal(result.comparisons.length, 7); // 4, 8, 9, 11, 12, 13 and 15
    assert.ok(result.comparisons.every((c) => c.match));
    assert.deepEqual(result.pcrs.get(9), pcrs256.get(9));
    assert.deepEqual(result.warnings, []);
  });

  it('compares the SHA-384 quote when the measurements are SHA-384 values', async () => {
    const { doc, nonce } = await fresh();
    const result = await validator(measure(pcrs384, [4, 9])).validate(doc, nonce);
    assert.equal(result.pcrs.get(4)!.length, 48);
  });

  it('rejects a mismatch on an enforced PCR, naming the PCR, the expected and the actual value', async () => {
    const { doc, nonce } = await fresh();
    const measurements = measure(pcrs256, [4, 9]);
    measurements['9'].expected = 'ab'.repeat(32);
    await assert.rejects(validator(measurements).validate(doc, nonce), (err: unknown) => {
      assert.ok(err instanceof AttestationError);
      const actual = Buffer.from(pcrs256.get(9)!).toString('hex');
      assert.ok(err.message.includes(`PCR 9: expected ${'ab'.repeat(32)}, got ${actual} (enforced)`), err.message);
      assert.ok(!err.message.includes('PCR 4:'));
      assert.equal(err.comparisons?.find((c) => c.index === 9)?.match, false);
      return true;
    });
  });

  it('passes a mismatch on a warnOnly PCR with a warning', async () => {
    const { doc, nonce } = await fresh();
    const measurements = { ...measure(pcrs256, [4]), '0': { expected: '11'.repeat(32), warnOnly: true } };
    const warnings: string[] = [];
    const result = await validator(measurements, warnings).validate(doc, nonce);
    assert.equal(result.warnings.length, 1);
    assert.match(result.warnings[0], /^PCR 0: expected 1111.*, got 0000.* \(warn only\)$/);
    assert.deepEqual(warnings, result.warnings);
  });

  it('refuses to be made from an empty or partial set of measurements, naming the missing PCRs', () => {
    assert.throws(() => validator({}), /incomplete: PCR 4, 8, 9, 11, 12, 13 are missing/);
    const partial = measure(pcrs256, []);
    delete partial['9'];
    assert.throws(() => validator(partial), /incomplete: PCR 9 is missing/);
  });

  it('refuses SHA-1 measurements and documents with only SHA-1 quotes', async () => {
    assert.throws(() => validator({ '4': { expected: '00'.repeat(20), warnOnly: false } }), /SHA-1/);
    const { doc, nonce } = await fresh();
    vtpm(doc).quotes = vtpm(doc)
      .quotes.slice(0, 1)
      .map((q) => ({ ...q, hashAlg: TPM_ALG.SHA1 }));
    await rejects(
      validator(measure(pcrs256, [4])).validate(doc, nonce),
      /no quote of the sha256 PCR bank.*SHA-1 banks are refused/,
    );
  });

  it('rejects a document whose AK is not trusted, before anything else', async () => {
    const { doc, nonce } = await fresh();
    const strict = createVtpmValidator({
      variant: 'test-vtpm',
      measurements: measure(pcrs256, []),
      trustAk: async () => {
        throw new Error('not registered');
      },
    });
    await rejects(strict.validate(doc, nonce), /attestation key is not trusted: not registered/);
  });

  it('rejects a tampered quote, signature, PCR value, user data, instance info or nonce', async () => {
    const v = validator(measure(pcrs256, [4, 9]));
    const cases: [string, (doc: AttestationDocument) => void, RegExp][] = [
      [
        'quote',
        (d) => (vtpm(d).quotes[0].quote = flipBase64(vtpm(d).quotes[0].quote, 40)),
        /signature does not verify/,
      ],
      [
        'signature',
        (d) => (vtpm(d).quotes[0].signature = flipBase64(vtpm(d).quotes[0].signature, 10)),
        /signature does not verify/,
      ],
      ['PCR value', (d) => (vtpm(d).quotes[0].pcrs['9'] = '00'.repeat(32)), /PCR values do not match/],
      ['user data', (d) => (d.userData = Buffer.from('purpose:init').toString('base64')), /other qualifying data/],
      [
        'instance info',
        (d) => (d.instanceInfo = Buffer.from('{"instance":"node-2"}').toString('base64')),
        /other qualifying data/,
      ],
    ];
    for (const [what, tamper, message] of cases) {
      const { doc, nonce } = await fresh();
      tamper(doc);
      await rejects(v.validate(doc, nonce), message).catch((err) => assert.fail(`${what}: ${err}`));
    }
    const { doc } = await fresh();
    await rejects(v.validate(doc, randomBytes(32)), /other qualifying data/);
  });

  it('rejects a quote of another PCR set than the values it comes with, and measured PCRs left out of the quote', async () => {
    const partial = new VtpmIssuer({ variant: 'test-vtpm', tpm: client, instanceInfo, pcrs: [0, 1, 2, 3, 4] });
    const nonce = randomBytes(32);
    const doc = await partial.issue(new Uint8Array(0), nonce);
    // Claim more PCRs than quoted: the unquoted values would be unverified.
    const claimed = structuredClone(doc);
    vtpm(claimed).quotes[0].pcrs['9'] = Buffer.from(pcrs256.get(9)!).toString('hex');
    await rejects(
      validator(measure(pcrs256, [4])).validate(claimed, nonce),
      /covers PCRs 0,1,2,3,4, but values were given for PCRs 0,1,2,3,4,9/,
    );
    // A measured PCR the quote does not cover never matches.
    await rejects(
      validator(measure(pcrs256, [4, 9])).validate(doc, nonce),
      /PCR 9: expected [0-9a-f]+, got \(not in the quote\) \(enforced\)/,
    );
  });

  it('rejects documents of another variant and malformed evidence', async () => {
    const { doc, nonce } = await fresh();
    const v = validator(measure(pcrs256, []));
    await rejects(
      v.validate({ ...doc, variant: 'azure-sev-snp' }, nonce),
      /variant "azure-sev-snp".*expects "test-vtpm"/,
    );
    await rejects(
      v.validate({ ...doc, attestation: { akPublic: 'AAAA', quotes: [] } }, nonce),
      /attestation.quotes holds no quote/,
    );
    await rejects(v.validate({ ...doc, userData: 'not base64!' }, nonce), /userData is not standard base64/);
  });

  // Last: it extends a PCR. The issuer reuses the values it read last only while the quote's digest proves them.
  it('carries a PCR extended between two documents with its new value, which the validator compares', async () => {
    const before = await fresh();
    await validator(measure(pcrs256, [16])).validate(before.doc, before.nonce);
    await client.pcrExtend(16, [{ hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(32).fill(7) }]);
    const now = await client.pcrRead(TPM_ALG.SHA256, [16]);
    assert.notDeepEqual(now.get(16), pcrs256.get(16));
    const after = await fresh();
    assert.equal(vtpm(after.doc).quotes[0].pcrs['16'], Buffer.from(now.get(16)!).toString('hex'));
    await validator(measure(now, [16])).validate(after.doc, after.nonce);
    await rejects(validator(measure(pcrs256, [16])).validate(after.doc, after.nonce), /PCR 16: expected/);
  });
});

function flipBase64(value: string, at: number): string {
  const bytes = Buffer.from(value, 'base64');
  bytes[at] ^= 1;
  return bytes.toString('base64');
}
