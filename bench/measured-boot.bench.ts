/**
 * Measured boot of a minimal UKI (Debian's systemd-stub + Debian's cloud kernel + the busybox boot-report initrd of
 * test/support/initrd.ts) on a raw GPT disk: how long `image measure`'s prediction takes on the host, and how long a
 * VM boot takes under QEMU + OVMF + swtpm from QEMU's start (firmware start) to the boot report on the serial
 * console (the init's first output after mounting, i.e. the earliest point a node program could be ready).
 * Target for a node image: firmware start to node program ready <= 45 s under TCG; this bench gives the share of
 * firmware, stub and kernel in it. Needs scripts/fetch-vm-test-inputs.sh's cache. `npm run bench -- measured-boot`.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { predictBootMeasurementsOfFile } from '../lib/node-image/measure.js';
import { assembleUki } from '../lib/node-image/uki.js';
import { writeEspDisk } from '../test/support/esp-disk.js';
import { bootReportInitrd } from '../test/support/initrd.js';
import { bootDisk } from '../test/support/vm-boot.js';

const CACHE = process.env.CONSTELLATION_VM_TEST_CACHE ?? path.join(homedir(), '.cache/constellation-ts/vm-test-inputs');
const TARGET_S = 45;

export default async function measuredBoot(out: (line: string) => void): Promise<void> {
  if (!existsSync(path.join(CACHE, 'vmlinuz')))
    throw new Error(`no VM test inputs in ${CACHE}: run scripts/fetch-vm-test-inputs.sh`);
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-measured-boot-'));
  try {
    const disk = path.join(dir, 'disk.raw');
    const uki = assembleUki(readFileSync('/usr/lib/systemd/boot/efi/linuxx64.efi.stub'), {
      linux: readFileSync(path.join(CACHE, 'vmlinuz')),
      osrel: 'ID=constellation-bench\n',
      cmdline: 'console=ttyS0 panic=-1',
      initrd: bootReportInitrd(readFileSync(path.join(CACHE, 'busybox'))),
    });
    writeEspDisk(disk, uki);
    const runs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const start = process.hrtime.bigint();
      predictBootMeasurementsOfFile(disk);
      runs.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    out(
      `image measure prediction (${(uki.length / 1024 / 1024).toFixed(1)} MiB UKI on a raw disk): ${Math.min(...runs).toFixed(0)} ms (fastest of 5)`,
    );
    const load = loadavg()[0]!.toFixed(1);
    const boot = await bootDisk(disk, { accel: 'tcg', cpus: 2 });
    const s = boot.bootMs / 1000;
    out(
      `TCG boot, 2 vCPUs, firmware start -> boot report: ${s.toFixed(1)} s (target for a node image to ready: <= ${TARGET_S} s; load average ${load} at start)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
