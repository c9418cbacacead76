import assert from 'node:assert/strict';
import { parseBootReport } from '../support/vm-boot.js';

const pcrLines = (count: number) =>
  Array.from({ length: count }, (_, n) => `CONSTELLATION-BOOT pcr-sha256 ${n} ${n.toString(16).padStart(64, '0')}`);

describe('the boot report a node prints on its serial console', () => {
  it('gives the 24 PCRs and the event log joined from its base64 chunks, ignoring console noise and CRs', () => {
    const log = Buffer.from('an event log of some bytes \x00\x01\x02');
    const b64 = log.toString('base64');
    const serial = [
      '[    8.05] Run /init as init process',
      ...pcrLines(24),
      `CONSTELLATION-BOOT eventlog ${b64.slice(0, 12)}`,
      `[    9.1] random: crng init done\rCONSTELLATION-BOOT eventlog ${b64.slice(12)}`,
      'CONSTELLATION-BOOT end',
    ].join('\r\n');
    const report = parseBootReport(serial);
    assert.equal(report.pcrs.size, 24);
    assert.equal(report.pcrs.get(23), '17'.padStart(64, '0'));
    assert.deepEqual(report.eventLog, log);
  });

  it('refuses a report without its end line (the guest stopped mid-report)', () => {
    assert.throws(() => parseBootReport(pcrLines(24).join('\n')), /no end line/);
  });

  it('refuses a report that lacks a PCR or gives one in uppercase', () => {
    assert.throws(() => parseBootReport([...pcrLines(23), 'CONSTELLATION-BOOT end'].join('\n')), /23 of 24 PCRs/);
    const upper = pcrLines(24).map((l, i) => (i === 5 ? l.replace(/0{64}$|[0-9a-f]{64}$/, 'A'.repeat(64)) : l));
    assert.throws(() => parseBootReport([...upper, 'CONSTELLATION-BOOT end'].join('\n')), /23 of 24 PCRs/);
  });
});
