import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AttestationReport } from '../../lib/attestation/report.js';
import { renderAttestationReport, reportAttestation } from '../../lib/attestation/report.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { defaultConfig, renderConfig } from '../../lib/config/index.js';
import { FakeAttester, FakeValidator } from '../atls/support/fake-attestation.js';
import { hasSwtpm, swtpmKit, type AttestationKit } from '../atls/support/kits.js';
import { runCli } from '../support/cli.js';
import { requireTool } from '../support/require-tool.js';

describe('attestation report (lib/attestation/report)', () => {
  const pcrs = { '4': '44'.repeat(32), '9': '99'.repeat(32), '15': '00'.repeat(32) };
  const attester = new FakeAttester(pcrs);
  const nonce = randomBytes(32);
  const measurements = {
    '4': { expected: '44'.repeat(32), warnOnly: false },
    '9': { expected: 'ab'.repeat(32), warnOnly: false },
    '15': { expected: '00'.repeat(32), warnOnly: true },
  };

  it('reports a rejected document with the PCR table from the validator', async () => {
    const document = await attester.issue(new Uint8Array(32), nonce);
    const report = await reportAttestation(
      document,
      nonce,
      new FakeValidator(measurements, [attester.akPublic]),
      measurements,
    );
    assert.equal(report.verdict, 'rejected');
    assert.match(report.error!, /PCR 9/);
    assert.equal(report.pcrsVerified, true);
    assert.deepEqual(
      report.pcrs.map((r) => [r.index, r.mode, r.match]),
      [
        [4, 'enforced', true],
        [9, 'enforced', false],
        [15, 'warn', true],
      ],
    );
    const text = renderAttestationReport(report);
    assert.match(text, /^Verdict: REJECTED \(variant test-fake-vtpm\)/);
    assert.match(text, new RegExp(`9\\s+${'ab'.repeat(32)}\\s+${'99'.repeat(32)}\\s+enforced\\s+NO`));
  });

  it('reports an accepted document with its warnings', async () => {
    const warnOnly = { ...measurements, '9': { expected: 'ab'.repeat(32), warnOnly: true } };
    const document = await attester.issue(new Uint8Array(32), nonce);
    const report = await reportAttestation(document, nonce, new FakeValidator(warnOnly, [attester.akPublic]), warnOnly);
    assert.equal(report.verdict, 'accepted');
    assert.equal(report.warnings.length, 1);
    assert.equal(report.error, undefined);
  });

  it('shows the claimed, unverified PCRs when the document fails before the comparison', async () => {
    const document = await attester.issue(new Uint8Array(32), nonce);
    const report = await reportAttestation(
      document,
      randomBytes(32),
      new FakeValidator(measurements, [attester.akPublic]),
      measurements,
    );
    assert.equal(report.verdict, 'rejected');
    assert.equal(report.pcrsVerified, false);
    assert.deepEqual(
      report.pcrs.map((r) => r.actual),
      [pcrs['4'], pcrs['9'], pcrs['15']],
    );
    assert.match(renderAttestationReport(report), /not verified/);
  });

  it('rejects a document of another variant without running the validator', async () => {
    const document = { ...(await attester.issue(new Uint8Array(32), nonce)), variant: 'gcp-sev-es' };
    const report = await reportAttestation(
      document,
      nonce,
      new FakeValidator(measurements, [attester.akPublic]),
      measurements,
    );
    assert.equal(report.verdict, 'rejected');
    assert.match(report.error!, /variant gcp-sev-es, but the config expects test-fake-vtpm/);
  });
});

describe('constellation attestation verify', function () {
  let kit: AttestationKit | undefined;
  let dir: string;
  const nonce = randomBytes(32);

  function measurementsFor(k: AttestationKit, overrides: Measurements = {}): Measurements {
    return {
      ...Object.fromEntries(k.measured.map((i) => [String(i), { expected: k.pcrs[String(i)], warnOnly: false }])),
      '15': { expected: k.pcrs['15'], warnOnly: true },
      ...overrides,
    };
  }

  async function writeConfig(file: string, measurements: Measurements): Promise<void> {
    const config = defaultConfig('local', { attestationVariant: 'local-vtpm' });
    (config.attestation as { localVTPM: { measurements: Measurements } }).localVTPM.measurements = measurements;
    await writeFile(file, renderConfig(config));
  }

  before(async function () {
    // A real local-vtpm document needs swtpm (installed by `npm test`'s system-deps step).
    requireTool(this, hasSwtpm(), 'swtpm');
    kit = await swtpmKit();
    dir = await mkdtemp(path.join(os.tmpdir(), 'attestation-verify-'));
    const document = await kit.issuer.issue(new Uint8Array(32).fill(7), nonce);
    const ak = Buffer.from((document.attestation as { akPublic: string }).akPublic, 'base64');
    await writeFile(path.join(dir, 'node.json'), JSON.stringify(document, null, 2));
    await writeFile(path.join(dir, 'ak.b64'), ak.toString('base64'));
    await writeFile(path.join(dir, 'ak.bin'), ak);
    await writeConfig(path.join(dir, 'constellation-conf.yaml'), measurementsFor(kit));
  });
  after(async () => {
    await kit?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('accepts a matching document and prints the verdict and PCR table as JSON', async () => {
    const res = await runCli(
      ['attestation', 'verify', 'node.json', '--nonce', nonce.toString('hex'), '--ak', 'ak.b64', '--json'],
      { cwd: dir },
    );
    assert.equal(res.code, 0, res.stderr + res.stdout);
    const report = JSON.parse(res.stdout) as AttestationReport;
    assert.equal(report.verdict, 'accepted');
    assert.equal(report.variant, 'local-vtpm');
    assert.deepEqual(
      report.pcrs.map((r) => [r.index, r.mode, r.match]),
      [
        [4, 'enforced', true],
        [8, 'enforced', true],
        [9, 'enforced', true],
        [11, 'enforced', true],
        [12, 'enforced', true],
        [13, 'enforced', true],
        [15, 'warn', true],
      ],
    );
    assert.equal(report.pcrs[0].actual, kit!.pcrs['4']);
  });

  it('rejects a mismatching enforced PCR with exit code 3 and a table naming it (binary AK, --config)', async () => {
    const other = path.join(dir, 'other.yaml');
    await writeConfig(other, measurementsFor(kit!, { '9': { expected: 'ab'.repeat(32), warnOnly: false } }));
    const res = await runCli([
      'attestation',
      'verify',
      path.join(dir, 'node.json'),
      '--nonce',
      nonce.toString('hex'),
      '--ak',
      path.join(dir, 'ak.bin'),
      '--config',
      other,
    ]);
    assert.equal(res.code, 3, res.stderr + res.stdout);
    assert.match(res.stdout, /^Verdict: REJECTED \(variant local-vtpm\)/);
    assert.match(res.stdout, /PCR 9/);
    assert.match(res.stdout, new RegExp(`\\n9\\s+${'ab'.repeat(32)}\\s+${kit!.pcrs['9']}\\s+enforced\\s+NO`));
    assert.match(res.stdout, new RegExp(`\\n15\\s+\\S+\\s+\\S+\\s+warn\\s+yes`));
  });

  it('rejects a document checked against another nonce, showing the claimed PCRs as unverified', async () => {
    const res = await runCli(['attestation', 'verify', 'node.json', '--ak', 'ak.b64', '--json'], { cwd: dir });
    assert.equal(res.code, 3, res.stderr);
    const report = JSON.parse(res.stdout) as AttestationReport;
    assert.equal(report.verdict, 'rejected');
    assert.equal(report.pcrsVerified, false);
    assert.match(report.error!, /nonce/);
  });

  it('says to pass --ak for local-vtpm when no AK is given', async () => {
    const res = await runCli(['attestation', 'verify', 'node.json', '--nonce', nonce.toString('hex')], { cwd: dir });
    assert.equal(res.code, 3);
    assert.match(res.stdout, /--ak/);
  });

  it('refuses a nonce that is not hex and a missing document, without a stack trace', async () => {
    const badNonce = await runCli(['attestation', 'verify', 'node.json', '--nonce', 'xyz'], { cwd: dir });
    assert.equal(badNonce.code, 1);
    assert.match(badNonce.stderr, /--nonce is not hex/);
    const missing = await runCli(['attestation', 'verify', 'nope.json'], { cwd: dir });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Cannot read the attestation document nope\.json: no such file/);
    for (const res of [badNonce, missing]) assert.doesNotMatch(res.stderr, /\n\s+at /);
  });

  it('refuses a document over 1 MiB by its size, before parsing it', async () => {
    await writeFile(path.join(dir, 'huge.json'), `{"variant":"${'x'.repeat(2 * 1024 * 1024)}"}`);
    const res = await runCli(['attestation', 'verify', 'huge.json'], { cwd: dir });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /^Error: The attestation document huge\.json is 2 MiB; the limit is 1 MiB\./);
  });
});
