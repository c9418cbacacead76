import assert from 'node:assert/strict';
import { createLogger, rateLimitedLogger } from '../../lib/logging/index.js';

describe('logging/rate-limit', () => {
  /** A rate-limited logger on a fake clock whose scheduled summaries run when the test says. */
  function harness(burst = 2) {
    let now = 0;
    const scheduled: Array<{ at: number; fn: () => void }> = [];
    const lines: Array<Record<string, unknown>> = [];
    const logger = rateLimitedLogger(
      createLogger((line) => lines.push(JSON.parse(line) as Record<string, unknown>)),
      {
        burst,
        windowMs: 1000,
        now: () => now,
        schedule: (fn, ms) => scheduled.push({ at: now + ms, fn }),
      },
    );
    const advance = (ms: number) => {
      now += ms;
      for (const s of scheduled.splice(0).filter((entry) => (entry.at <= now ? (entry.fn(), false) : true)))
        scheduled.push(s);
    };
    return { logger, lines, advance };
  }

  it('writes the first lines of a burst, then one summary with the count when the window ends', () => {
    const { logger, lines, advance } = harness();
    for (let i = 0; i < 1000; i++)
      logger.warn('init request ended before any secret arrived', { peer: `10.0.0.1:${i}` });
    assert.equal(lines.length, 2);
    advance(1000);
    assert.equal(lines.length, 3);
    assert.equal(
      lines[2].msg,
      'init request ended before any secret arrived (repeated 998 more times in 1 s; those lines were left out)',
    );
    assert.equal(lines[2].level, 'warn');
    assert.equal(lines[2].suppressed, 998);
  });

  it('counts each message and level apart, and starts a new window after the old one', () => {
    const { logger, lines, advance } = harness();
    for (let i = 0; i < 3; i++) logger.warn('a');
    for (let i = 0; i < 3; i++) logger.error('a');
    logger.warn('b');
    assert.deepEqual(
      lines.map((l) => `${l.level}:${l.msg}`),
      ['warn:a', 'warn:a', 'error:a', 'error:a', 'warn:b'],
    );
    advance(1500);
    logger.warn('a');
    assert.deepEqual(
      lines.slice(5).map((l) => l.msg),
      [
        'a (repeated 1 more time in 1 s; those lines were left out)',
        'a (repeated 1 more time in 1 s; those lines were left out)',
        'a',
      ],
    );
  });

  it('never limits info lines (work done for attested peers), nor writes a summary when nothing was left out', () => {
    const { logger, lines, advance } = harness();
    for (let i = 0; i < 50; i++) logger.info('join ticket issued', { nodeName: `worker-${i}` });
    logger.warn('once');
    advance(5000);
    assert.equal(lines.length, 51);
  });
});
