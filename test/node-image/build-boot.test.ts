import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { builtQemuImage, missingPackages } from '../support/built-image.js';
import { bootDisk } from '../support/vm-boot.js';

describe('the built qemu image boots under OVMF + swtpm (TCG) and its PCRs are its signed measurements', function () {
  this.timeout(30 * 60_000);

  it('PCR 4, 9 and 11 read in the booted VM equal measurements.json; 8, 12, 13 are zero', async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      if (process.env.CI === 'true')
        throw new Error(`the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\``);
      this.skip();
    }
    const image = await builtQemuImage();
    const signed = JSON.parse(await fs.readFile(path.join(image.dir, 'measurements.json'), 'utf8')) as {
      measurements: Record<string, { expected: string }>;
    };
    const { report } = await bootDisk(image.rawDisk, { memoryMiB: 2048, timeoutMs: 25 * 60_000 });
    for (const pcr of [4, 9, 11, 8, 12, 13])
      assert.equal(report.pcrs.get(pcr), signed.measurements[pcr].expected, `PCR ${pcr}`);
    assert.ok(report.eventLog.length > 0, 'the guest exposes its event log');
  });
});
