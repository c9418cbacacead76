/**
 * pollUntil (lib/poll.ts) on a fake clock: when it asks, how long it pauses, what it does at the deadline and on
 * abort. No test here waits for real time.
 */
import assert from 'node:assert/strict';
import { pollUntil, PollTimeoutError } from '../lib/poll.js';
import { fakeTime } from './support/fake-time.js';

describe('pollUntil', () => {
  it('resolves with the first value the check returns, without pausing when the first check answers', async () => {
    const time = fakeTime();
    const value = await pollUntil(() => 'ready', { timeoutMs: 1000, intervalMs: 100, ...time });
    assert.equal(value, 'ready');
    assert.deepEqual(time.slept, []);
  });

  it('asks again after each pause until the check answers', async () => {
    const time = fakeTime();
    const attempts: number[] = [];
    const value = await pollUntil(
      (attempt) => {
        attempts.push(attempt);
        return attempt === 3 ? attempt : undefined;
      },
      { timeoutMs: 1000, intervalMs: 100, ...time },
    );
    assert.equal(value, 3);
    assert.deepEqual(attempts, [1, 2, 3]);
    assert.deepEqual(time.slept, [100, 100]);
  });

  it('treats falsy values other than undefined as answers', async () => {
    const time = fakeTime();
    assert.equal(await pollUntil(() => false, { timeoutMs: 1000, intervalMs: 100, ...time }), false);
    assert.equal(await pollUntil(() => 0, { timeoutMs: 1000, intervalMs: 100, ...time }), 0);
  });

  it('rejects with a PollTimeoutError naming the condition after the deadline passes', async () => {
    const time = fakeTime();
    let checks = 0;
    await assert.rejects(
      pollUntil(() => void checks++, { timeoutMs: 1000, intervalMs: 300, what: "swtpm's sockets", ...time }),
      (err: unknown) => err instanceof PollTimeoutError && /1000 ms waiting for swtpm's sockets/.test(err.message),
    );
    // Checks at 0, 300, 600, 900 and, with the last pause cut to the deadline, at 1000.
    assert.equal(checks, 5);
    assert.deepEqual(time.slept, [300, 300, 300, 100]);
    assert.equal(time.elapsed(), 1000);
  });

  it('checks at least once even with no time to wait', async () => {
    const time = fakeTime();
    let checks = 0;
    await assert.rejects(
      pollUntil(() => void checks++, { timeoutMs: 0, intervalMs: 100, ...time }),
      PollTimeoutError,
    );
    assert.equal(checks, 1);
    assert.deepEqual(time.slept, []);
  });

  it('counts the time a slow check takes against the deadline', async () => {
    const time = fakeTime();
    let checks = 0;
    await assert.rejects(
      pollUntil(
        () => {
          checks++;
          time.advance(600);
          return undefined;
        },
        { timeoutMs: 1000, intervalMs: 100, ...time },
      ),
      PollTimeoutError,
    );
    assert.equal(checks, 2);
    assert.deepEqual(time.slept, [100]);
  });

  it("at the deadline, throws onTimeout's error", async () => {
    const time = fakeTime();
    await assert.rejects(
      pollUntil(() => undefined, {
        timeoutMs: 500,
        intervalMs: 100,
        onTimeout: () => {
          throw new Error('the node never joined');
        },
        ...time,
      }),
      /the node never joined/,
    );
  });

  it("at the deadline, resolves with onTimeout's value", async () => {
    const time = fakeTime();
    const alive = await pollUntil<number[]>(() => undefined, {
      timeoutMs: 500,
      intervalMs: 100,
      onTimeout: () => [42],
      ...time,
    });
    assert.deepEqual(alive, [42]);
  });

  it('ends the wait with the error the check throws, without asking again', async () => {
    const time = fakeTime();
    let checks = 0;
    await assert.rejects(
      pollUntil(
        () => {
          checks++;
          throw new Error('refused: PCR 4');
        },
        { timeoutMs: 1000, intervalMs: 100, ...time },
      ),
      /refused: PCR 4/,
    );
    assert.equal(checks, 1);
  });

  it('pauses as long as an interval function says, given the attempt', async () => {
    const time = fakeTime();
    await pollUntil((attempt) => (attempt === 4 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: (attempt) => attempt * 10,
      ...time,
    });
    assert.deepEqual(time.slept, [10, 20, 30]);
  });

  it('stops asking once the signal aborts', async () => {
    const time = fakeTime();
    const controller = new AbortController();
    let checks = 0;
    await assert.rejects(
      pollUntil(
        () => {
          if (++checks === 2) controller.abort(new Error('shutting down'));
          return undefined;
        },
        { timeoutMs: 10_000, intervalMs: 100, signal: controller.signal, ...time },
      ),
      /shutting down/,
    );
    assert.equal(checks, 2);
  });

  it('on the real clock and sleep, waits about intervalMs between checks', async () => {
    const started = Date.now();
    const value = await pollUntil((attempt) => (attempt === 3 ? 'ok' : undefined), { timeoutMs: 5000, intervalMs: 10 });
    assert.equal(value, 'ok');
    assert.ok(Date.now() - started >= 15, 'two real pauses of 10 ms');
  });
});
