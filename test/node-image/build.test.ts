import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, createPublicKey } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { verifyBlob } from '../../lib/images/cosign-signature.js';
import { findEspBootFile, gptPartitions } from '../../lib/node-image/disk.js';
import { predictBootMeasurements } from '../../lib/node-image/measure.js';
import { ukiSections } from '../../lib/node-image/uki.js';
import { ALL_PACKAGES, debFileName } from '../../lib/node-image/build/packages.js';
import type { ImageManifest } from '../../lib/node-image/build/index.js';
import { readProviderFileLists } from '../../lib/node-image/build/node-program.js';
import {
  NODE_BINARY,
  NODE_PROGRAM_DIR,
  builtQemuImage,
  missingPackages,
  runImageBuild,
  type BuiltTestImage,
} from '../support/built-image.js';

/** The initrd's cpio: the kernel unpacks a zstd frame; Node.js 20 has no zstd, so the zstd program decompresses it. */
const unzstd = (data: Buffer): Buffer => execFileSync('zstd', ['-d', '-c', '-q'], { input: data, maxBuffer: 1 << 30 });

/** The entries of a cpio newc archive: path -> mode and data. */
function readCpio(
  archive: Buffer,
): Map<string, { mode: number; data: Buffer; ino: number; mtime: number; uid: number }> {
  const out = new Map<string, { mode: number; data: Buffer; ino: number; mtime: number; uid: number }>();
  let pos = 0;
  const field = (i: number) => parseInt(archive.toString('ascii', pos + 6 + i * 8, pos + 14 + i * 8), 16);
  for (;;) {
    assert.equal(archive.toString('ascii', pos, pos + 6), '070701', `cpio magic at ${pos}`);
    const [ino, mode, uid, , , mtime, size, , , , , nameSize] = Array.from({ length: 12 }, (_, i) => field(i));
    const name = archive.toString('utf8', pos + 110, pos + 110 + nameSize - 1);
    const dataStart = Math.ceil((pos + 110 + nameSize) / 4) * 4;
    if (name === 'TRAILER!!!') return out;
    out.set(name, { mode, data: archive.subarray(dataStart, dataStart + size), ino, mtime, uid });
    pos = Math.ceil((dataStart + size) / 4) * 4;
  }
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('constellation image build --provider qemu (a real build from the cached Debian packages)', function () {
  this.timeout(20 * 60_000);
  let image: BuiltTestImage;
  let manifest: ImageManifest;
  let raw: Buffer;
  let sections: Map<string, Buffer>;

  before(async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      const message = `the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\` (npm run pretest does)`;
      if (process.env.CI === 'true') throw new Error(message);
      this.skip();
    }
    image = await builtQemuImage();
    manifest = JSON.parse(await fs.readFile(path.join(image.dir, 'manifest.json'), 'utf8')) as ImageManifest;
    raw = await fs.readFile(image.rawDisk);
    sections = new Map(ukiSections(findEspBootFile(raw).data).map((s) => [s.name, s.data]));
  });

  it('writes a raw GPT disk whose one partition is an EFI system partition holding the UKI at \\EFI\\BOOT\\BOOTX64.EFI', async () => {
    const { partitions } = gptPartitions(raw);
    assert.equal(partitions.length, 1);
    assert.equal(partitions[0].typeGuid.toString('hex'), '28732ac11ff8d211ba4b00a0c93ec93b'); // C12A7328-F81F-11D2-BA4B-00A0C93EC93B, the EFI system partition
    assert.equal(raw.length % (1024 * 1024), 0);
    const boot = findEspBootFile(raw);
    assert.equal(boot.path, '\\EFI\\BOOT\\BOOTX64.EFI');
    assert.deepEqual(boot.data, await fs.readFile(path.join(image.dir, 'constellation-qemu-v0.0.1-test.efi')));
    // Nothing else on the ESP: mdir lists one folder chain and one file.
    const offset = partitions[0].firstLba * 512;
    const listing = execFileSync('mdir', ['-/', '-b', '-i', `${image.rawDisk}@@${offset}`, '::'], {
      env: { ...process.env, MTOOLS_SKIP_CHECK: '1' },
    })
      .toString()
      .trim()
      .split('\n');
    assert.deepEqual(listing, ['::/EFI/', '::/EFI/BOOT/', '::/EFI/BOOT/BOOTX64.EFI']);
  });

  it("the UKI is Debian's systemd-stub with Debian's cloud kernel, the initrd, os-release and a command line naming the provider", () => {
    assert.deepEqual(
      [...sections.keys()]
        .filter((n) => n.startsWith('.') && ['.linux', '.osrel', '.cmdline', '.initrd', '.uname'].includes(n))
        .sort(),
      ['.cmdline', '.initrd', '.linux', '.osrel', '.uname'],
    );
    const cmdline = sections.get('.cmdline')!.toString();
    assert.match(
      cmdline,
      /^console=ttyS0 .*constellation\.csp=qemu constellation\.attestation-variant=qemu-vtpm constellation\.kubernetes-backend=none/,
    );
    assert.equal(cmdline, manifest.kernelCommandLine);
    assert.equal(sections.get('.uname')!.toString(), manifest.inputs.kernel.release);
    assert.match(sections.get('.osrel')!.toString(), /IMAGE_VERSION="v0\.0\.1-test"/);
  });

  it("the initrd is a zstd-compressed cpio (no checksum) with fixed times, owner root and inode numbers in path order, holding the node userland and of the node program only a qemu node's files", async () => {
    const initrd = sections.get('.initrd')!;
    assert.equal(initrd.readUInt32LE(0), 0xfd2fb528, 'a zstd frame');
    assert.equal(initrd[4] & 0x04, 0, 'no content checksum');
    const entries = readCpio(unzstd(initrd));
    assert.equal(sha256(initrd), manifest.components.initrd.sha256);
    assert.ok([...entries.values()].every((e) => e.mtime === 0 && e.uid === 0));
    assert.deepEqual(
      [...entries.values()].map((e) => e.ino),
      Array.from({ length: entries.size }, (_, i) => i + 1),
    );
    for (const file of [
      'init',
      'usr/bin/busybox',
      'usr/bin/node',
      'usr/sbin/cryptsetup',
      'usr/sbin/mke2fs',
      'usr/bin/etcd',
      'usr/lib/constellation/node-program/main.cjs',
      'etc/constellation/modules',
    ]) {
      assert.ok(entries.has(file), `${file} in the initrd`);
    }
    assert.equal(sha256(await fs.readFile(NODE_BINARY)), manifest.inputs.nodejs.sha256, "the package's binary");
    assert.equal(sha256(entries.get('usr/bin/node')!.data), manifest.inputs.nodejs.shipped.sha256, 'the copy shipped');
    // Of the node program, exactly the files a qemu node can load (providers.json), which carry no cloud SDK.
    const prefix = 'usr/lib/constellation/node-program/';
    const program = [...entries.keys()]
      .filter((p) => p.startsWith(prefix) && (entries.get(p)!.mode & 0o170000) === 0o100000)
      .map((p) => p.slice(prefix.length))
      .sort();
    const qemu = (await readProviderFileLists(NODE_PROGRAM_DIR)).providers.qemu!;
    assert.deepEqual(program, qemu.files);
    assert.deepEqual(
      manifest.inputs.nodeProgram.files.map((f) => f.path),
      program,
    );
    assert.deepEqual(
      qemu.packages.filter((p) => /^@(google-cloud|aws-sdk|azure)\//.test(p)),
      [],
    );
    const modules = entries.get('etc/constellation/modules')!.data.toString().trim().split('\n');
    for (const m of ['virtio_blk', 'virtio_net', 'dm-crypt', 'dm-integrity', 'tun', 'fuse', 'dm-mod'])
      assert.ok(
        modules.some((p) => p.endsWith(`/${m}.ko`)),
        `${m} loaded at boot`,
      );
    assert.ok(
      modules.indexOf(modules.find((p) => p.endsWith('/dm-mod.ko'))!) <
        modules.indexOf(modules.find((p) => p.endsWith('/dm-crypt.ko'))!),
      'dm-mod before dm-crypt',
    );
    assert.match(entries.get('init')!.data.toString(), /CONSTELLATION-BOOT end/);
  });

  it('every program of the initrd finds its shared libraries inside the initrd (ld.so --list in a chroot)', async function () {
    if (process.getuid?.() !== 0) {
      if (process.env.CI === 'true') throw new Error('this check needs root (chroot); CI runs as root');
      this.skip();
    }
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'initrd-root-'));
    try {
      const entries = readCpio(unzstd(sections.get('.initrd')!));
      for (const [p, e] of entries) {
        const target = path.join(root, p);
        const type = e.mode & 0o170000;
        if (type === 0o040000) await fs.mkdir(target, { recursive: true });
        else if (type === 0o120000) await fs.symlink(e.data.toString(), target);
        else if (type === 0o100000) await fs.writeFile(target, e.data, { mode: e.mode & 0o777 });
      }
      for (const program of [
        '/usr/bin/node',
        '/usr/bin/etcd',
        '/usr/sbin/cryptsetup',
        '/usr/sbin/mke2fs',
        '/usr/sbin/sshd',
      ]) {
        const out = execFileSync('chroot', [root, '/lib64/ld-linux-x86-64.so.2', '--list', program]).toString();
        assert.doesNotMatch(out, /not found/, `${program}:\n${out}`);
      }
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });

  it('signs measurements.json with the image key: PCR 4, 9, 11 as predicted from the disk, 8/12/13 zero, firmware PCRs warn only', async () => {
    const file = await fs.readFile(path.join(image.dir, 'measurements.json'));
    const signature = await fs.readFile(path.join(image.dir, 'measurements.json.sig'), 'utf8');
    const publicKey = createPublicKey(
      await fs.readFile(path.join(image.configHome, 'constellation', 'image-signing-key.pub'), 'utf8'),
    );
    assert.ok(verifyBlob(publicKey, file, signature));
    const parsed = JSON.parse(file.toString()) as {
      version: string;
      variant: string;
      measurements: Record<string, { expected: string; warnOnly: boolean }>;
    };
    assert.equal(parsed.version, 'v0.0.1-test');
    assert.equal(parsed.variant, 'qemu-vtpm');
    const predicted = predictBootMeasurements(raw).pcrs;
    for (const pcr of [4, 9, 11])
      assert.deepEqual(parsed.measurements[pcr], { expected: predicted[pcr], warnOnly: false });
    for (const pcr of [8, 12, 13])
      assert.deepEqual(parsed.measurements[pcr], { expected: '0'.repeat(64), warnOnly: false });
    for (const pcr of [0, 1, 2, 3, 6, 7]) assert.equal(parsed.measurements[pcr].warnOnly, true);
  });

  it('the manifest lists every Debian package with version and the SHA-256 of its .deb, Node.js, the bundle, the stub, and each output', async () => {
    assert.deepEqual(
      manifest.inputs.debianPackages.map((p) => `${p.name}=${p.version}`),
      ALL_PACKAGES.map((p) => `${p.name}=${p.version}`),
    );
    for (const pkg of manifest.inputs.debianPackages) {
      assert.equal(pkg.sha256, sha256(await fs.readFile(path.join(image.packageCache, debFileName(pkg)))), pkg.name);
    }
    assert.match(manifest.inputs.nodejs.version, /^\d+\.\d+\.\d+$/);
    assert.ok(manifest.inputs.nodeProgram.files.some((f) => f.path === 'main.cjs'));
    assert.match(manifest.inputs.stub.package, /^systemd-boot-efi=/);
    for (const out of manifest.outputs)
      assert.equal(out.sha256, sha256(await fs.readFile(path.join(image.dir, out.name))), out.name);
    assert.deepEqual(
      manifest.outputs.map((o) => o.name),
      ['constellation-qemu-v0.0.1-test.efi', 'constellation-qemu-v0.0.1-test.raw', 'measurements.json'],
    );
  });

  it('a second build from the same inputs gives the same bytes', async () => {
    const second = await fs.mkdtemp(path.join(os.tmpdir(), 'image-build-again-'));
    try {
      await runImageBuild(second, image.configHome, image.packageCache);
      for (const name of [
        'constellation-qemu-v0.0.1-test.raw',
        'constellation-qemu-v0.0.1-test.efi',
        'measurements.json',
        'manifest.json',
      ]) {
        const [a, b] = await Promise.all([
          fs.readFile(path.join(image.dir, name)),
          fs.readFile(path.join(second, name)),
        ]);
        assert.ok(a.equals(b), `${name} differs between two builds`);
      }
    } finally {
      await fs.rm(second, { recursive: true, force: true });
    }
  });
});
