import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { EventLogError, parseEventLog, replayEventLog } from '../../lib/attestation/index.js';
import { gce } from './gce-fixture.js';

describe('TCG crypto-agile event log', () => {
  it('parses the GCE log: header with SHA-1, SHA-256 and SHA-384 banks, then its events', () => {
    const log = parseEventLog(gce.eventLog);
    assert.deepEqual(
      log.specId.algorithms.map((a) => a.algorithmId),
      [4, 11, 12],
    );
    assert.ok(log.events.length > 10);
    assert.ok(log.events.every((e) => e.pcrIndex <= 23));
  });

  it('replays to PCRs 0-9 of every bank of the GCE quotes', () => {
    const replayed = replayEventLog(gce.eventLog);
    for (const bank of gce.banks) {
      const quoted = gce.quote(bank).pcrs;
      const values = replayed.get(bank)!;
      for (let i = 0; i <= 9; i++) {
        assert.equal(
          Buffer.from(values.get(i)!).toString('hex'),
          Buffer.from(quoted.get(i)!).toString('hex'),
          `bank ${bank} PCR ${i}`,
        );
      }
    }
  });

  it('replays a changed event digest to a different PCR value', () => {
    const digestTampered = gce.eventLog.slice();
    const events = parseEventLog(gce.eventLog).events;
    const last = events[events.length - 1];
    const at = Buffer.from(digestTampered).lastIndexOf(Buffer.from(last.digests.get(11)!));
    digestTampered[at] ^= 1;
    const pcr = last.pcrIndex;
    assert.notDeepEqual(
      replayEventLog(digestTampered).get(11)!.get(pcr),
      replayEventLog(gce.eventLog).get(11)!.get(pcr),
    );
  });

  it('refuses logs that are not crypto-agile or are truncated', () => {
    assert.throws(() => parseEventLog(new Uint8Array(100)), EventLogError);
    assert.throws(() => parseEventLog(gce.eventLog.subarray(0, gce.eventLog.length - 7)), /truncated/);
    assert.throws(() => parseEventLog(new Uint8Array(3)), /truncated/);
  });

  it('ignores trailing padding', () => {
    const padded = new Uint8Array([...gce.eventLog, ...new Uint8Array(64).fill(0xff)]);
    assert.equal(parseEventLog(padded).events.length, parseEventLog(gce.eventLog).events.length);
  });
});
