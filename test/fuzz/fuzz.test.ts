/**
 * The short fuzz run of `npm test` (issue 13, item 9): every target of targets.ts for FUZZ_TEST_MS each, with a
 * fixed seed per run of the suite (printed on failure, so a finding can be replayed with FUZZ_SEED). A target
 * passes when no input made its parser throw an error it does not document, or take over SLOW_INPUT_MS.
 * `npm run fuzz` runs the same targets for minutes (scripts/fuzz.ts).
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { UserError } from '../../lib/errors.js';
import { runTarget } from './run-target.js';
import { bytesLike, makeTargets, SLOW_INPUT_MS, type FuzzTarget } from './targets.js';

const FUZZ_TEST_MS = 700;
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);

describe('fuzzing the parsers of attacker-controlled bytes (short run; npm run fuzz runs long)', function () {
  this.timeout(60_000);
  let targets: FuzzTarget[];
  before(async () => {
    targets = await makeTargets();
  });
  after(async () => {
    await Promise.all(targets.map((t) => t.close?.()));
  });

  it('reports a parser that throws an undocumented error, with the smallest input fast-check finds', async () => {
    const escaping: FuzzTarget = {
      name: 'escaping',
      parses: 'a parser with a bug',
      inputs: bytesLike([new Uint8Array([1, 2, 3])]),
      run: (bytes) => {
        if ((bytes as Uint8Array).includes(0x42)) throw new TypeError('cannot read properties of undefined');
        throw new UserError('refused');
      },
      expected: (err) => err instanceof UserError,
    };
    const run = await runTarget(escaping, { timeMs: 5000, seed: 1 });
    assert.equal(run.finding?.error, 'threw TypeError: cannot read properties of undefined');
    assert.match(run.finding?.input ?? '', /^"hex:([0-9a-f]{2})*?42/);
  });

  it('reports a parser that takes too long for one input', async () => {
    const slow: FuzzTarget = {
      name: 'slow',
      parses: 'a quadratic parser',
      inputs: fc.constant(new Uint8Array(8)),
      run: () => {
        const until = performance.now() + SLOW_INPUT_MS + 50;
        while (performance.now() < until);
      },
      expected: () => false,
    };
    const run = await runTarget(slow, { timeMs: 5000, seed: 1, maxRuns: 1 });
    assert.match(run.finding?.error ?? '', /^took \d+ ms for one input of 8 bytes$/);
  });

  it('covers every parser the issue names', () => {
    assert.deepEqual(
      targets.map((t) => t.name),
      [
        'der',
        'csr',
        'certificate',
        'pem',
        'snp-report',
        'tdx-quote',
        'tpm-structures',
        'tpm-quote',
        'event-log',
        'node-image',
        'sealed',
        'attestation-document',
        'local-vtpm-document',
        'config-yaml',
        'state-yaml',
        'metadata-requests',
        'grpc-messages',
      ],
    );
  });

  it('finds no input that escapes the documented errors or is slow, in any target', async () => {
    const findings: string[] = [];
    for (const target of targets) {
      const run = await runTarget(target, { timeMs: FUZZ_TEST_MS, seed: SEED });
      assert.ok(run.iterations > 0, `${target.name} ran no input`);
      if (run.finding)
        findings.push(
          `${target.name} (seed ${run.finding.seed}, path ${run.finding.path}): ${run.finding.error}\n    input: ${run.finding.input}`,
        );
    }
    assert.deepEqual(findings, [], `findings:\n${findings.join('\n')}`);
  });
});
