import assert from 'node:assert/strict';
import { runWithSteps } from '../../cli/cluster/reporter.js';

const steps = [
  { id: 'a', title: 'Step A' },
  { id: 'b', title: 'Step B' },
  { id: 'c', title: 'Step C' },
] as const;

describe('runWithSteps', () => {
  it("returns the call's result, with steps reported, skipped and never reached", async () => {
    const result = await runWithSteps(steps, 'silent', async (report) => {
      report('a');
      report('a', 'detail');
      report('c', 'jumped over b');
      return 42;
    });
    assert.equal(result, 42);
  });

  it("throws the call's own error (with its hint)", async () => {
    const error = Object.assign(new Error('first line\nsecond line'), { hint: 'do this' });
    await assert.rejects(
      runWithSteps(steps, 'silent', async (report) => {
        report('b');
        throw error;
      }),
      (err) => err === error,
    );
    await assert.rejects(
      runWithSteps(steps, 'silent', async () => {
        throw error;
      }),
      (err) => err === error,
    );
  });
});
