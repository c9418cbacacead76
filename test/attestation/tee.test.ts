/**
 * Getting TEE reports on a confidential VM (lib/attestation/tee): configfs-tsm first, /dev/sev-guest where the
 * kernel lacks it, and the certificate table both hand out. The kernel's side is emulated (support/emulated-tee.ts
 * and a SevGuestDevice that checks the ioctl's buffers as the sev-guest driver lays them out).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  encodeCertTable,
  parseCertTable,
  snpReport,
  tdxQuote,
  type SevGuestDevice,
} from '../../lib/attestation/tee/index.js';
import { parseSnpReport } from '../../lib/attestation/snp/report.js';
import {
  makeEndorsementKey,
  makeSnpReport,
  makeSnpTestCa,
  type EndorsementKey,
  type SnpTestCa,
} from './snp/fixtures.js';
import { emulatedTsm, snpGuest } from './support/emulated-tee.js';

const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('hex');

describe('TEE reports (configfs-tsm, /dev/sev-guest)', () => {
  let ca: SnpTestCa;
  let vcek: EndorsementKey;
  before(() => {
    ca = makeSnpTestCa('Milan');
    vcek = makeEndorsementKey(ca);
  });

  describe('certificate table', () => {
    it('round-trips VCEK, ASK and ARK by their GUIDs and stops at the zero entry', () => {
      const table = encodeCertTable({ vcek: vcek.cert.der, ask: ca.ask.der, ark: ca.ark.der });
      const certs = parseCertTable(Buffer.concat([table, Buffer.alloc(64)]));
      assert.deepEqual(Object.keys(certs).sort(), ['ark', 'ask', 'vcek']);
      assert.equal(hex(certs.vcek), hex(vcek.cert.der));
    });

    it('refuses an entry that points past the table and a table without its end', () => {
      const table = Buffer.from(encodeCertTable({ vcek: vcek.cert.der }));
      assert.throws(() => parseCertTable(table.subarray(0, 60)), /points past its end/);
      assert.throws(() => parseCertTable(table.subarray(0, 24)), /points past its end|no terminating entry/);
    });
  });

  describe('configfs-tsm', () => {
    it('writes the report data, reads report and certificates, and removes its entry', async () => {
      const tsm = emulatedTsm(snpGuest(ca, vcek));
      const data = randomBytes(64);
      const evidence = await snpReport(data, { tsm });
      assert.equal(hex(tsm.requests[0]), hex(data));
      assert.equal(hex(parseSnpReport(evidence.report).reportData), hex(data));
      assert.equal(hex(evidence.certs.vcek), hex(vcek.cert.der));
      assert.equal(hex(evidence.certs.ark), hex(ca.ark.der));
      assert.equal(tsm.entries(), 0);
    });

    it('reads again when another writer moved the generation in between', async () => {
      const tsm = emulatedTsm(snpGuest(ca, vcek));
      tsm.raceOnce();
      await snpReport(randomBytes(64), { tsm });
      assert.equal(tsm.requests.length, 2);
    });

    it('refuses a report of the other TEE, and report data that is not 64 bytes', async () => {
      const tdx = emulatedTsm(() => ({ provider: 'tdx_guest', outblob: new Uint8Array([1, 2, 3]) }));
      await assert.rejects(
        snpReport(randomBytes(64), { tsm: tdx }),
        /tdx_guest report, but this variant needs SEV-SNP/,
      );
      assert.equal(hex(await tdxQuote(randomBytes(64), { tsm: tdx })), '010203');
      await assert.rejects(snpReport(randomBytes(32), { tsm: tdx }), /64 bytes/);
    });
  });

  describe('/dev/sev-guest where configfs-tsm is absent', () => {
    const noTsm = { root: '/nonexistent/tsm/report' };

    /** The sev-guest driver and host: SNP_GET_EXT_REPORT, asking once for a larger certificate buffer. */
    function fakeDevice(certTable: Uint8Array): SevGuestDevice & { calls: number } {
      const device = {
        calls: 0,
        async extReport(request: Buffer, response: Buffer, certs: Buffer) {
          device.calls++;
          assert.equal(request.length, 112);
          const certsLen = request.readUInt32LE(104);
          if (certsLen < certTable.length + 4096 * 8) {
            request.writeUInt32LE(certTable.length + 4096 * 8, 104);
            return { result: -5, exitinfo2: 1n << 32n };
          }
          const report = makeSnpReport({ reportData: request.subarray(0, 64), vmpl: request.readUInt32LE(64) }, vcek);
          response.writeUInt32LE(0, 0);
          response.writeUInt32LE(report.length, 4);
          response.set(report, 32);
          certs.set(certTable, 0);
          return { result: 0, exitinfo2: 0n };
        },
        close: async () => undefined,
      };
      return device;
    }

    it('issues SNP_GET_EXT_REPORT, growing the certificate buffer when the host asks', async () => {
      const device = fakeDevice(encodeCertTable({ vcek: vcek.cert.der, ask: ca.ask.der, ark: ca.ark.der }));
      const data = randomBytes(64);
      const evidence = await snpReport(data, { tsm: noTsm, sevGuest: { device } });
      assert.equal(device.calls, 2);
      assert.equal(hex(parseSnpReport(evidence.report).reportData), hex(data));
      assert.equal(hex(evidence.certs.ask), hex(ca.ask.der));
    });

    it('says when the device is missing', async () => {
      await assert.rejects(
        snpReport(randomBytes(64), { tsm: noTsm, sevGuest: { path: '/nonexistent/sev-guest' } }),
        /Cannot open \/nonexistent\/sev-guest/,
      );
      await assert.rejects(tdxQuote(randomBytes(64), { tsm: noTsm }), /need configfs-tsm/);
    });
  });
});
