import assert from 'node:assert/strict';
import { LogTail } from '../../bootstrapper/log-tail.js';
import { createLogger } from '../../lib/logging/index.js';

describe('bootstrapper/log-tail', () => {
  it('keeps the newest lines within its size, already redacted by the logger', () => {
    const tail = new LogTail(200);
    const logger = createLogger(tail.sink);
    for (let i = 0; i < 20; i++) logger.info(`line ${i}`, { masterSecret: 'do-not-show' });
    const text = Buffer.from(tail.snapshot()).toString();
    assert.ok(text.length <= 200);
    assert.match(text, /line 19"/);
    assert.doesNotMatch(text, /line 0"/);
    assert.doesNotMatch(text, /do-not-show/);
    assert.ok(text.endsWith('\n'));
  });
});
