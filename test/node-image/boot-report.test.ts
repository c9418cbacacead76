import assert from 'node:assert/strict';
import { gce } from '../attestation/gce-fixture.js';
import { DamagedBootReportError, parseBootReport, retryDamagedReport } from '../support/vm-boot.js';

const pcrLines = (count: number) =>
  Array.from({ length: count }, (_, n) => `CONSTELLATION-BOOT pcr-sha256 ${n} ${n.toString(16).padStart(64, '0')}`);

/** A real TCG event log (GCE's), as `base64 -w <width>` prints it: fixed-width lines, the last one shorter. */
const LOG = Buffer.from(gce.eventLog);
const chunksOf = (width: number) => LOG.toString('base64').match(new RegExp(`.{1,${width}}`, 'g'))!;
const CHUNKS = chunksOf(96);
const KERNEL = '[    9.104822] random: crng init done';

/** Serial output with the report; `eventlog` replaces the eventlog lines (default: one per chunk). */
function serial(eventlog: string[] = CHUNKS.map((c) => `CONSTELLATION-BOOT eventlog ${c}`)): string[] {
  return [
    'BdsDxe: starting Boot0001 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x3,0x0)',
    '[    8.05] Run /init as init process',
    ...pcrLines(24),
    ...eventlog,
    'CONSTELLATION-BOOT end',
  ];
}
/** The 1-based serial line number of eventlog chunk `i` (0-based) in `serial()`. */
const lineOfChunk = (i: number) => 2 + 24 + i + 1;

/** Asserts `fn` throws a DamagedBootReportError whose message matches each of `patterns`. */
function assertDamaged(fn: () => unknown, ...patterns: RegExp[]): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof DamagedBootReportError, `a DamagedBootReportError, not ${String(err)}`);
    for (const p of patterns) assert.match(err.message, p);
    return true;
  });
}

describe('the boot report a node prints on its serial console', () => {
  it('gives the 24 PCRs and the event log joined from its base64 chunks, ignoring console noise and CRs', () => {
    const lines = serial();
    // Whole kernel lines between report lines are harmless: one on its own line, one ended by a bare CR.
    lines.splice(lineOfChunk(10) - 1, 0, KERNEL);
    lines[lineOfChunk(20)] = `${KERNEL}\r${lines[lineOfChunk(20)]}`;
    const report = parseBootReport(lines.join('\r\n'));
    assert.equal(report.pcrs.size, 24);
    assert.equal(report.pcrs.get(23), '17'.padStart(64, '0'));
    assert.deepEqual(report.eventLog, LOG);
  });

  it("takes the node image's 76-character `base64` lines as well as the test initrd's 96", () => {
    const report = parseBootReport(serial(chunksOf(76).map((c) => `CONSTELLATION-BOOT eventlog ${c}`)).join('\n'));
    assert.deepEqual(report.eventLog, LOG);
  });

  it('refuses, naming the line, an eventlog line a kernel message was written into (extra words)', () => {
    const lines = serial();
    // The message lands after the chunk, before the line's newline: the chunk is whole, the line is not.
    lines[lineOfChunk(7) - 1] += KERNEL;
    lines.splice(lineOfChunk(7), 0, '');
    assertDamaged(
      () => parseBootReport(lines.join('\n')),
      new RegExp(`^The boot report is damaged: serial line ${lineOfChunk(7)} \\(event-log chunk 8\\) has 6 words`),
      /random: crng init done/,
    );
  });

  it('refuses, naming both lines, an eventlog line a kernel message split in two', () => {
    const lines = serial();
    const chunk = CHUNKS[40]!;
    // The kernel message ends its own line: the chunk's start stays behind the prefix, its rest has none.
    lines.splice(lineOfChunk(40) - 1, 1, `CONSTELLATION-BOOT eventlog ${chunk.slice(0, 40)}`, KERNEL, chunk.slice(40));
    assertDamaged(
      () => parseBootReport(lines.join('\n')),
      new RegExp(
        `serial line ${lineOfChunk(40)} \\(event-log chunk 41 of ${CHUNKS.length}\\) has 40 characters, the other lines 96`,
      ),
      new RegExp(`serial line ${lineOfChunk(40) + 2} looks like the rest of a report line`),
    );
    // And when the message is written into the line, the split line has extra words as well.
    const inline = serial();
    inline.splice(
      lineOfChunk(40) - 1,
      1,
      `CONSTELLATION-BOOT eventlog ${chunk.slice(0, 40)}${KERNEL}`,
      chunk.slice(40),
    );
    assertDamaged(
      () => parseBootReport(inline.join('\n')),
      new RegExp(`serial line ${lineOfChunk(40)} \\(event-log chunk 41\\) has 6 words`),
      new RegExp(`serial line ${lineOfChunk(40) + 1} looks like the rest of a report line`),
    );
  });

  it('refuses, naming the line, a middle eventlog line whose prefix a kernel message cut (the old parser dropped it)', () => {
    const lines = serial();
    lines.splice(lineOfChunk(100) - 1, 1, `CONSTELL${KERNEL}`, `ATION-BOOT eventlog ${CHUNKS[100]}`);
    assertDamaged(
      () => parseBootReport(lines.join('\n')),
      new RegExp(`serial line ${lineOfChunk(100) + 1} looks like the rest of a report line a kernel message cut`),
    );
  });

  it('refuses a report missing a whole middle eventlog line without a trace: its event log does not parse', () => {
    const lines = serial();
    lines.splice(lineOfChunk(100) - 1, 1);
    assertDamaged(
      () => parseBootReport(lines.join('\n')),
      new RegExp(
        `${CHUNKS.length - 1} event-log chunks \\(serial lines ${lineOfChunk(0)}-.*decode to no TCG event log`,
      ),
    );
  });

  it('refuses a last chunk that is no base64 tail, and a chunk with a character outside base64', () => {
    const tail = serial();
    tail[lineOfChunk(CHUNKS.length - 1) - 1] += 'A';
    assertDamaged(() => parseBootReport(tail.join('\n')), /total \d+ characters, not a multiple of 4/);
    const padded = serial();
    padded[lineOfChunk(3) - 1] = padded[lineOfChunk(3) - 1]!.replace(/.$/, '=');
    assertDamaged(
      () => parseBootReport(padded.join('\n')),
      new RegExp(`serial line ${lineOfChunk(3)} \\(event-log chunk 4 of \\d+\\) has a character outside base64 at 96`),
    );
  });

  it('refuses a PCR line a kernel message was written into as damaged, not as a missing PCR', () => {
    const lines = serial();
    lines[2 + 9] += KERNEL;
    assertDamaged(() => parseBootReport(lines.join('\n')), /serial line 12 is not "pcr-sha256 <N> <64 hex>"/);
  });

  it('refuses a report without its end line (the guest stopped mid-report), and says so rather than "damaged"', () => {
    assert.throws(() => parseBootReport(pcrLines(24).join('\n')), /no end line/);
    // Cut off mid-chunk: incomplete, not damaged.
    const cut = serial().slice(0, lineOfChunk(50));
    cut[cut.length - 1] = cut.at(-1)!.slice(0, 60);
    assert.throws(
      () => parseBootReport(cut.join('\n')),
      (err: unknown) =>
        err instanceof Error && !(err instanceof DamagedBootReportError) && /no end line/.test(err.message),
    );
  });

  it('refuses a report that lacks a PCR or gives one in uppercase', () => {
    assert.throws(() => parseBootReport([...pcrLines(23), 'CONSTELLATION-BOOT end'].join('\n')), /23 of 24 PCRs/);
    const upper = pcrLines(24).map((l, i) => (i === 5 ? l.replace(/0{64}$|[0-9a-f]{64}$/, 'A'.repeat(64)) : l));
    assert.throws(() => parseBootReport([...upper, 'CONSTELLATION-BOOT end'].join('\n')), /23 of 24 PCRs/);
  });
});

describe('a boot whose report is damaged', () => {
  const damaged = () => new DamagedBootReportError(['serial line 40 (event-log chunk 12) has 6 words: "…"']);

  it('is booted once more, with one line saying so', async () => {
    const logged: string[] = [];
    let boots = 0;
    const result = await retryDamagedReport(
      async () => {
        boots++;
        if (boots === 1) throw damaged();
        return 'report';
      },
      'base.raw',
      (line) => logged.push(line),
    );
    assert.equal(result, 'report');
    assert.equal(boots, 2);
    assert.equal(logged.length, 1);
    assert.match(logged[0]!, /^vm-boot: base\.raw: damaged boot report \(serial line 40 .*\); booting once more$/);
  });

  it('is booted only once more: a second damaged report is the error', async () => {
    let boots = 0;
    await assert.rejects(
      retryDamagedReport(
        () => {
          boots++;
          return Promise.reject(damaged());
        },
        'base.raw',
        () => {},
      ),
      DamagedBootReportError,
    );
    assert.equal(boots, 2);
  });

  it('is not booted again for any other error (a timeout, no end line)', async () => {
    let boots = 0;
    const logged: string[] = [];
    await assert.rejects(
      retryDamagedReport(
        () => {
          boots++;
          return Promise.reject(new Error('the boot report has no end line'));
        },
        'base.raw',
        (line) => logged.push(line),
      ),
      /no end line/,
    );
    assert.equal(boots, 1);
    assert.deepEqual(logged, []);
  });
});
