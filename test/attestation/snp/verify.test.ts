import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TESTDATA } from '../../support/testdata.js';
import { SnpReportError, SnpVerifier, verifySnpReport, type SnpCheck } from '../../../lib/attestation/snp/index.js';
import { makeEndorsementKey, makeSnpReport, makeSnpTestCa, type SnpTestCa } from './fixtures.js';

const DATA = TESTDATA;
const AZURE = path.join(DATA, 'attestation/azure-sev-snp');
const report = new Uint8Array(readFileSync(path.join(AZURE, 'attestation.bin')));
const vcekPem = readFileSync(path.join(AZURE, 'vcek.pem'), 'utf8');
const vcekDer = new Uint8Array(readFileSync(path.join(AZURE, 'vcek.cert')));
const milanChain = readFileSync(path.join(AZURE, 'certchain.pem'), 'utf8');
const genoaChain = readFileSync(path.join(DATA, 'amd-roots/ask_ark_genoa.pem'), 'utf8');
const NOW = new Date('2024-06-01T00:00:00Z');

const pems = (s: string) => s.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];

/** Runs `fn`, expects an SnpReportError and returns the checks that failed. */
function failedChecks(fn: () => unknown): SnpCheck[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SnpReportError, `expected SnpReportError, got ${String(err)}`);
    return err.failures.map((f) => f.check);
  }
  assert.fail('verification passed but should have failed');
}

describe('SEV-SNP report verification against real Azure evidence', () => {
  it('verifies with the PEM VCEK and the Milan chain, and returns the parsed report', () => {
    const r = verifySnpReport(report, { signingCert: vcekPem, certChain: milanChain, now: NOW });
    assert.equal(r.version, 2);
    assert.equal(r.vmpl, 0);
    assert.equal(r.policy, 0x3001fn);
    assert.equal(r.policyFlags.debug, false);
    assert.deepEqual(r.reportedTcb, { bootloader: 2, tee: 0, snp: 6, microcode: 0x5d });
    assert.deepEqual(r.launchTcb, { bootloader: 2, tee: 0, snp: 6, microcode: 0x5d });
    assert.equal(r.signingKey, 'vcek');
    assert.equal(r.product, 'Milan');
    assert.equal(r.reportData.length, 64);
    assert.equal(r.measurement.length, 48);
    const runtimeData = readFileSync(path.join(AZURE, 'runtimedata.bin'));
    assert.equal(
      Buffer.from(r.reportData.subarray(0, 32)).toString('hex'),
      createHash('sha256').update(runtimeData).digest('hex'),
    );
  });

  it('verifies with the DER VCEK and the shipped AMD chain when none is given', () => {
    const r = verifySnpReport(report, { signingCert: vcekDer, now: NOW });
    assert.equal(r.signingKey, 'vcek');
  });

  it('accepts the minimum TCB when the report meets it exactly', () => {
    verifySnpReport(report, {
      signingCert: vcekDer,
      now: NOW,
      minimumTcb: { bootloader: 2, tee: 0, snp: 6, microcode: 0x5d },
    });
  });

  it('rejects every single-byte change in the signed part of the report', () => {
    const verifier = new SnpVerifier();
    for (let i = 0; i < 0x2a0; i++) {
      const changed = Uint8Array.from(report);
      changed[i] ^= 0x01;
      const checks = failedChecks(() =>
        verifier.verify(changed, { signingCert: vcekDer, certChain: milanChain, now: NOW }),
      );
      assert.ok(checks.length > 0, `byte 0x${i.toString(16)}`);
    }
  });

  it('names the signature as the reason for a change in the measurement', () => {
    const changed = Uint8Array.from(report);
    changed[0x90] ^= 0xff;
    assert.deepEqual(
      failedChecks(() => verifySnpReport(changed, { signingCert: vcekDer, now: NOW })),
      ['signature'],
    );
  });

  it('rejects a wrong chain (Genoa for a Milan VCEK)', () => {
    const checks = failedChecks(() =>
      verifySnpReport(report, { signingCert: vcekPem, certChain: genoaChain, now: NOW }),
    );
    assert.ok(checks.includes('chain'));
  });

  it('rejects a swapped ARK (Milan ASK under the Genoa ARK)', () => {
    const swapped = `${pems(milanChain)[0]}\n${pems(genoaChain)[1]}\n`;
    assert.throws(
      () => verifySnpReport(report, { signingCert: vcekPem, certChain: swapped, now: NOW }),
      (e: unknown) => {
        assert.ok(e instanceof SnpReportError && e.has('chain'));
        assert.match(e.message, /not signed by the ARK/);
        return true;
      },
    );
  });

  it("rejects an ARK that is not AMD's", () => {
    const ca = makeSnpTestCa('Milan');
    const foreign = `${pems(milanChain)[0]}\n${ca.ark.pem}`;
    assert.ok(
      failedChecks(() => verifySnpReport(report, { signingCert: vcekPem, certChain: foreign, now: NOW })).includes(
        'chain',
      ),
    );
  });

  it("rejects at a time outside the certificates' validity", () => {
    assert.deepEqual(
      failedChecks(() =>
        verifySnpReport(report, { signingCert: vcekPem, certChain: milanChain, now: new Date('2031-01-01T00:00:00Z') }),
      ),
      ['validity'],
    );
    assert.deepEqual(
      failedChecks(() =>
        verifySnpReport(report, { signingCert: vcekPem, certChain: milanChain, now: new Date('2023-01-01T00:00:00Z') }),
      ),
      ['validity'],
    );
  });

  it('rejects a VMPL change and a debug policy, naming them', () => {
    const vmpl = Uint8Array.from(report);
    vmpl[0x30] = 1;
    assert.deepEqual(
      failedChecks(() => verifySnpReport(vmpl, { signingCert: vcekDer, now: NOW })),
      ['vmpl', 'signature'],
    );
    const debug = Uint8Array.from(report);
    debug[0x0a] |= 0x08; // policy bit 19
    assert.deepEqual(
      failedChecks(() => verifySnpReport(debug, { signingCert: vcekDer, now: NOW })),
      ['debug', 'signature'],
    );
  });

  it("rejects a minimum launch TCB above the report's", () => {
    for (const minimumTcb of [{ bootloader: 3 }, { tee: 1 }, { snp: 7 }, { microcode: 0x5e }]) {
      assert.throws(
        () => verifySnpReport(report, { signingCert: vcekDer, now: NOW, minimumTcb }),
        (e: unknown) => {
          assert.ok(e instanceof SnpReportError);
          assert.deepEqual([...new Set(e.failures.map((f) => f.check))], ['minimum-tcb']);
          assert.match(e.message, /launch TCB is below the minimum/);
          return true;
        },
      );
    }
  });

  it('rejects REPORT_DATA that does not bind the expected data', () => {
    assert.deepEqual(
      failedChecks(() =>
        verifySnpReport(report, { signingCert: vcekDer, now: NOW, reportData: new Uint8Array(32).fill(1) }),
      ),
      ['report-data'],
    );
  });

  it('refuses a truncated report as a format error', () => {
    assert.deepEqual(
      failedChecks(() => verifySnpReport(report.subarray(0, 1000), { signingCert: vcekDer, now: NOW })),
      ['format'],
    );
  });
});

describe('SEV-SNP report verification with a test CA', () => {
  let ca: SnpTestCa;
  let verifier: SnpVerifier;
  const now = new Date('2025-01-01T00:00:00Z');
  before(() => {
    ca = makeSnpTestCa('Milan');
    verifier = new SnpVerifier({ roots: ca.roots });
  });

  it('verifies a VCEK-signed report and rejects each bad field for its own reason', () => {
    const vcek = makeEndorsementKey(ca);
    const opts = { signingCert: vcek.cert.pem, certChain: ca.vcekChain, now };
    verifier.verify(makeSnpReport({}, vcek), opts);
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({ vmpl: 2 }, vcek), opts)),
      ['vmpl'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({ policy: 0x30000n | (1n << 19n) }, vcek), opts)),
      ['debug'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({ chipId: new Uint8Array(64).fill(9) }, vcek), opts)),
      ['chip-id'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({ reportedTcb: { ...vcek.tcb, snp: 9 } }, vcek), opts)),
      ['tcb'],
    );
    assert.deepEqual(
      failedChecks(() =>
        verifier.verify(makeSnpReport({ launchTcb: { ...vcek.tcb, snp: 1 } }, vcek), {
          ...opts,
          minimumTcb: { snp: 8 },
        }),
      ),
      ['minimum-tcb'],
    );
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({ signingKey: 'vlek' }, vcek), opts)),
      ['signing-key'],
    );
    // The test CA is not AMD's: the default verifier refuses it.
    assert.ok(failedChecks(() => verifySnpReport(makeSnpReport({}, vcek), opts)).includes('chain'));
  });

  it('verifies a VLEK-signed report against the ASVK and refuses a VLEK under the ASK', () => {
    const vlek = makeEndorsementKey(ca, { kind: 'vlek' });
    const r = verifier.verify(makeSnpReport({ signingKey: 'vlek' }, vlek), {
      signingCert: vlek.cert.der,
      certChain: ca.vlekChain,
      now,
    });
    assert.equal(r.signingKey, 'vlek');
    assert.ok(
      failedChecks(() =>
        verifier.verify(makeSnpReport({ signingKey: 'vlek' }, vlek), {
          signingCert: vlek.cert.der,
          certChain: ca.vcekChain,
          now,
        }),
      ).includes('chain'),
    );
    // A VLEK whose issuer key is the ASK's, presented with the ASK chain: the kinds do not match.
    const misissued = makeEndorsementKey(ca, { kind: 'vlek', issuerKey: ca.askKey });
    assert.ok(
      failedChecks(() =>
        verifier.verify(makeSnpReport({ signingKey: 'vlek' }, misissued), {
          signingCert: misissued.cert.der,
          certChain: ca.vcekChain,
          now,
        }),
      ).includes('chain'),
    );
  });

  it('keeps checking validity for a cached chain', () => {
    const vcek = makeEndorsementKey(ca, { notAfter: new Date('2026-01-01T00:00:00Z') });
    const opts = { signingCert: vcek.cert.pem, certChain: ca.vcekChain };
    verifier.verify(makeSnpReport({}, vcek), { ...opts, now });
    assert.deepEqual(
      failedChecks(() => verifier.verify(makeSnpReport({}, vcek), { ...opts, now: new Date('2027-01-01T00:00:00Z') })),
      ['validity'],
    );
  });

  it('reads the Turin TCB layout and 8-byte hardware id', () => {
    const turin = makeSnpTestCa('Turin');
    const v = new SnpVerifier({ roots: turin.roots });
    const tcb = { fmc: 1, bootloader: 4, tee: 0, snp: 23, microcode: 72 };
    const chipId = new Uint8Array(64);
    chipId.set([1, 2, 3, 4, 5, 6, 7, 8]);
    const vcek = makeEndorsementKey(turin, { tcb, chipId });
    const r = v.verify(
      makeSnpReport({ version: 3, cpuid: { family: 0x1a, model: 0x02, stepping: 0 } }, vcek, 'Turin'),
      { signingCert: vcek.cert.der, certChain: turin.vcekChain, now },
    );
    assert.deepEqual(r.reportedTcb, tcb);
    assert.equal(r.product, 'Turin');
    // A report whose CPUID names another product than the chain's is refused.
    const wrongCpu = makeSnpReport({ version: 3, cpuid: { family: 0x19, model: 0x11, stepping: 0 } }, vcek, 'Turin');
    assert.ok(
      failedChecks(() => v.verify(wrongCpu, { signingCert: vcek.cert.der, certChain: turin.vcekChain, now })).includes(
        'product',
      ),
    );
  });
});
