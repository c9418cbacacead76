import assert from 'node:assert/strict';
import { TdxQuoteError, TdxVerifier, verifyTdxQuote, type TdxCheck } from '../../../lib/attestation/tdx/index.js';
import { makeTdxQuote, makeTdxTestCa, type TdxTestCa } from './fixtures.js';

function failedChecks(fn: () => unknown): TdxCheck[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof TdxQuoteError, `expected TdxQuoteError, got ${String(err)}`);
    return err.failures.map((f) => f.check);
  }
  assert.fail('verification passed but should have failed');
}

describe('TDX quote v4 verification', () => {
  let ca: TdxTestCa;
  let verifier: TdxVerifier;
  const now = new Date('2025-01-01T00:00:00Z');
  before(() => {
    ca = makeTdxTestCa();
    verifier = new TdxVerifier({ roots: [ca.rootPem] });
  });

  it('verifies a quote chained to the trusted root and returns its fields', () => {
    const reportData = new Uint8Array(64).fill(0x42);
    const q = verifier.verify(makeTdxQuote(ca, { reportData }), {
      now,
      reportData,
      qeSvn: 8,
      pceSvn: 13,
      mrSeam: new Uint8Array(48).fill(0x5e),
      teeTcbSvn: Buffer.from('03000500', 'hex'),
    });
    assert.equal(q.version, 4);
    assert.equal(q.qeSvn, 8);
    assert.equal(q.pceSvn, 13);
    assert.deepEqual(q.body.reportData, reportData);
    assert.equal(q.qeReport.isvProdId, 2);
  });

  it("refuses a chain to another root than Intel's by default", () => {
    assert.ok(failedChecks(() => verifyTdxQuote(makeTdxQuote(ca), { now })).includes('pck-chain'));
  });

  it('refuses a PCK chain from another CA', () => {
    const other = makeTdxTestCa();
    assert.ok(failedChecks(() => verifier.verify(makeTdxQuote(other), { now })).includes('pck-chain'));
  });

  it('refuses a QE report not signed by the PCK key', () => {
    const other = makeTdxTestCa();
    // The chain is the trusted one, the QE report is signed by another PCK key.
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote({ ...other, pckChain: ca.pckChain }), { now })),
      ['qe-report-signature'],
    );
  });

  it('refuses a QE report that does not bind the attestation key', () => {
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca, { unboundQeReport: true }), { now })),
      ['qe-report-data'],
    );
  });

  it('refuses every single-byte change in the signed header and body', () => {
    const quote = makeTdxQuote(ca);
    for (let i = 0; i < 0x278; i++) {
      const changed = Uint8Array.from(quote);
      changed[i] ^= 0x01;
      assert.ok(failedChecks(() => verifier.verify(changed, { now })).length > 0, `byte 0x${i.toString(16)}`);
    }
  });

  it('names each TD field that fails the config', () => {
    assert.deepEqual(
      failedChecks(() =>
        verifier.verify(makeTdxQuote(ca, { tdAttributes: Uint8Array.of(1, 0, 0, 0, 0, 0, 0, 0) }), { now }),
      ),
      ['debug'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now, mrSeam: new Uint8Array(48) })),
      ['mr-seam'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now, teeTcbSvn: Buffer.from('0400', 'hex') })),
      ['tee-tcb-svn'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now, qeSvn: 9 })),
      ['qe-svn'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now, pceSvn: 14 })),
      ['pce-svn'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now, reportData: new Uint8Array(32).fill(1) })),
      ['report-data'],
    );
  });

  it('refuses an expired PCK chain', () => {
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeTdxQuote(ca), { now: new Date('2046-01-01T00:00:00Z') })),
      ['validity', 'validity', 'validity'],
    );
  });

  it('refuses truncated and non-TDX quotes as format errors', () => {
    const quote = makeTdxQuote(ca);
    assert.deepEqual(
      failedChecks(() => verifier.verify(quote.subarray(0, 700), { now })),
      ['format'],
    );
    const sgx = Uint8Array.from(quote);
    sgx[4] = 0;
    assert.deepEqual(
      failedChecks(() => verifier.verify(sgx, { now })),
      ['format'],
    );
  });
});
