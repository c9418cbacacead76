/**
 * The proof under real firmware: a UKI (Debian's systemd-stub + Debian's cloud kernel + a busybox initrd that prints
 * the boot report) on a raw GPT disk, booted by QEMU + OVMF with swtpm as the TPM. The PCRs the guest reads from its
 * TPM equal `image measure`'s prediction, the event log the guest kernel exposes replays to them, and one changed
 * initrd byte or a changed command line moves prediction and boot alike. The UKIs carry a .uname section, which
 * systemd-stub 252 does not measure (newer stubs do). Three boots, run in parallel: TCG, or KVM where
 * a probe boot (remembered per kernel in the cache) shows it works.
 * Inputs come from scripts/fetch-vm-test-inputs.sh (run by `pretest`); the test never reaches the network.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { parseEventLog, replayEventLog } from '../../lib/attestation/eventlog.js';
import {
  EVENT_TYPE_NAMES,
  predictBootMeasurementsOfFile,
  type BootMeasurements,
} from '../../lib/node-image/measure.js';
import { assembleUki } from '../../lib/node-image/uki.js';
import { writeEspDisk } from '../support/esp-disk.js';
import { bootReportInitrd } from '../support/initrd.js';
import { bootDisk, chooseAccel, type BootResult } from '../support/vm-boot.js';

const CACHE = process.env.CONSTELLATION_VM_TEST_CACHE ?? path.join(homedir(), '.cache/constellation-ts/vm-test-inputs');
const STUB = '/usr/lib/systemd/boot/efi/linuxx64.efi.stub';
const SHA256 = 0x000b;
const CMDLINE = 'console=ttyS0 panic=-1';

interface Booted {
  prediction: BootMeasurements;
  boot: BootResult;
}

describe('measured boot under OVMF + swtpm', function () {
  this.timeout(900_000);
  let dir: string;
  let booted: Record<'base' | 'initrdByte' | 'cmdline', Booted>;

  before(async function () {
    if (!existsSync(path.join(CACHE, 'vmlinuz')) || !existsSync(path.join(CACHE, 'busybox'))) {
      if (process.env.CI === 'true')
        assert.fail(
          `VM test inputs missing in ${CACHE}: run scripts/fetch-vm-test-inputs.sh (npm test's pretest does)`,
        );
      this.skip();
    }
    dir = mkdtempSync(path.join(tmpdir(), 'vm-boot-test-'));
    const stub = readFileSync(STUB);
    const kernel = readFileSync(path.join(CACHE, 'vmlinuz'));
    const busybox = readFileSync(path.join(CACHE, 'busybox'));
    const initrd = bootReportInitrd(busybox);
    // One changed byte: the last byte of busybox's data inside the cpio archive.
    const changedInitrd = Buffer.from(initrd);
    const at = changedInitrd.indexOf(busybox.subarray(-64)) + 63;
    changedInitrd[at] = changedInitrd[at]! ^ 0x01;
    const variants = {
      base: { initrd, cmdline: CMDLINE },
      initrdByte: { initrd: changedInitrd, cmdline: CMDLINE },
      cmdline: { initrd, cmdline: `${CMDLINE} constellation.test=changed` },
    };
    const disks = Object.entries(variants).map(([name, v]) => {
      const disk = path.join(dir, `${name}.raw`);
      writeEspDisk(
        disk,
        assembleUki(stub, {
          linux: kernel,
          osrel: 'ID=constellation-boot-test\n',
          cmdline: v.cmdline,
          initrd: v.initrd,
          uname: '6.1.0-test-uname',
        }),
      );
      return [name, disk, predictBootMeasurementsOfFile(disk)] as const;
    });
    // KVM only where a probe boot shows it works (remembered per kernel in the cache); TCG otherwise.
    const kernelId = createHash('sha256').update(kernel).digest('hex').slice(0, 16);
    const accel = await chooseAccel(disks[0]![1], path.join(CACHE, `accel-${kernelId}`));
    const entries = await Promise.all(
      disks.map(async ([name, disk, prediction]) => {
        // Under TCG one vCPU each: three VMs share this machine's two cores with everything else running.
        const boot = await bootDisk(disk, { accel, cpus: accel === 'kvm' ? 2 : 1, timeoutMs: 600_000 });
        console.log(
          `      boot ${name}: firmware start to boot report ${(boot.bootMs / 1000).toFixed(1)} s (${accel}, 3 boots in parallel)`,
        );
        return [name, { prediction, boot }] as const;
      }),
    );
    booted = Object.fromEntries(entries) as typeof booted;
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const name of ['base', 'initrdByte', 'cmdline'] as const) {
    it(`reports PCR 4, 9, 11 (and zero 8, 12, 13) equal to the prediction (${name})`, () => {
      const { prediction, boot } = booted[name];
      for (const pcr of [4, 8, 9, 11, 12, 13])
        assert.equal(boot.report.pcrs.get(pcr), prediction.pcrs[pcr], `PCR ${pcr}`);
    });
  }

  it('exposes an event log that replays to the reported PCRs, with exactly the predicted events (type, digest, order) for 4, 9 and 11', () => {
    const { prediction, boot } = booted.base;
    const log = parseEventLog(boot.report.eventLog);
    const replayed = replayEventLog(log).get(SHA256)!;
    for (const pcr of [0, 1, 2, 3, 4, 5, 6, 7, 9, 11]) {
      assert.equal(
        Buffer.from(replayed.get(pcr) ?? Buffer.alloc(32)).toString('hex'),
        boot.report.pcrs.get(pcr),
        `PCR ${pcr}`,
      );
    }
    const logged = log.events
      .filter((e) => [4, 9, 11].includes(e.pcrIndex))
      .map((e) => [
        e.pcrIndex,
        EVENT_TYPE_NAMES[e.eventType] ?? `0x${e.eventType.toString(16)}`,
        Buffer.from(e.digests.get(SHA256)!).toString('hex'),
      ]);
    assert.deepEqual(
      logged,
      prediction.events.map((e) => [e.pcr, e.type, e.digest]),
    );
  });

  it('moves PCR 9 and 11 in prediction and boot alike when one initrd byte changes', () => {
    for (const pcr of [4, 9, 11]) {
      assert.notEqual(booted.initrdByte.prediction.pcrs[pcr], booted.base.prediction.pcrs[pcr], `predicted PCR ${pcr}`);
      assert.notEqual(
        booted.initrdByte.boot.report.pcrs.get(pcr),
        booted.base.boot.report.pcrs.get(pcr),
        `booted PCR ${pcr}`,
      );
    }
  });

  it('moves PCR 9 and 11 in prediction and boot alike when the command line changes', () => {
    for (const pcr of [4, 9, 11]) {
      assert.notEqual(booted.cmdline.prediction.pcrs[pcr], booted.base.prediction.pcrs[pcr], `predicted PCR ${pcr}`);
      assert.notEqual(
        booted.cmdline.boot.report.pcrs.get(pcr),
        booted.base.boot.report.pcrs.get(pcr),
        `booted PCR ${pcr}`,
      );
    }
  });
});
