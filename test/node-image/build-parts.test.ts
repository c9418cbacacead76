import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { writeCpio, type CpioEntry } from '../../lib/node-image/build/cpio.js';
import { derivedGuid } from '../../lib/node-image/build/disk.js';
import { elfDependencies, withoutUnmappedTail } from '../../lib/node-image/build/elf.js';
import { vhdFooter, vhdGeometry, writeFixedVhd, writeGceTarball } from '../../lib/node-image/build/formats.js';
import { addKubernetesBinaries, imageMeasurements } from '../../lib/node-image/build/index.js';
import { kernelCommandLine } from '../../lib/node-image/build/init.js';
import { moduleDepends } from '../../lib/node-image/build/modules.js';
import { fetchPackages } from '../../lib/node-image/build/packages.js';
import { RootTree } from '../../lib/node-image/build/rootfs.js';
import { requireTools, type CommandRunner } from '../../lib/node-image/build/tools.js';
import { installStandinKubeadm } from '../bootstrapper/kubernetes/standin-kubeadm.js';
import { NODE_BINARY } from '../support/built-image.js';

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('image build parts', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'image-parts-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  describe('cpio newc writer', () => {
    const entries: CpioEntry[] = [
      { path: 'usr/bin/x', type: 'file', mode: 0o755, data: Buffer.from('#!/bin/sh\n') },
      { path: 'usr', type: 'dir', mode: 0o755 },
      { path: 'usr/bin', type: 'dir', mode: 0o755 },
      { path: 'bin', type: 'symlink', target: 'usr/bin' },
      { path: 'dev/console', type: 'chardev', mode: 0o600, major: 5, minor: 1 },
      { path: 'dev', type: 'dir', mode: 0o755 },
    ];

    it('gives the same bytes whatever the order of the entries', () => {
      assert.ok(writeCpio(entries).equals(writeCpio([...entries].reverse())));
    });

    it('writes folders before their content, each entry owned by root with the given mtime and the next inode number', () => {
      const archive = writeCpio(entries, 1700000000);
      const seen: Array<{ name: string; ino: number; uid: number; gid: number; mtime: number }> = [];
      for (let pos = 0; pos < archive.length;) {
        assert.equal(archive.toString('ascii', pos, pos + 6), '070701');
        const field = (i: number) => parseInt(archive.toString('ascii', pos + 6 + i * 8, pos + 14 + i * 8), 16);
        const nameSize = field(11);
        seen.push({
          name: archive.toString('latin1', pos + 110, pos + 110 + nameSize - 1),
          ino: field(0),
          uid: field(2),
          gid: field(3),
          mtime: field(5),
        });
        const dataStart = Math.ceil((pos + 110 + nameSize) / 4) * 4;
        pos = Math.ceil((dataStart + field(6)) / 4) * 4;
      }
      assert.deepEqual(
        seen.map((e) => e.name),
        ['bin', 'dev', 'dev/console', 'usr', 'usr/bin', 'usr/bin/x', 'TRAILER!!!'],
      );
      assert.deepEqual(
        seen.slice(0, -1).map((e) => e.ino),
        [1, 2, 3, 4, 5, 6],
      );
      assert.ok(seen.slice(0, -1).every((e) => e.uid === 0 && e.gid === 0 && e.mtime === 1700000000));
    });

    it('refuses duplicate and non-relative paths', () => {
      assert.throws(() => writeCpio([...entries, { path: 'usr', type: 'dir', mode: 0o755 }]), /duplicate path usr/);
      assert.throws(() => writeCpio([{ path: '/etc', type: 'dir', mode: 0o755 }]), /bad path/);
      assert.throws(() => writeCpio([{ path: 'a/../b', type: 'dir', mode: 0o755 }]), /bad path/);
    });
  });

  it('reads the interpreter and needed libraries of an ELF file (the pinned Node.js)', async () => {
    const deps = elfDependencies(await fs.readFile(NODE_BINARY));
    assert.equal(deps?.interpreter, '/lib64/ld-linux-x86-64.so.2');
    assert.ok(deps?.needed.includes('libc.so.6'));
    assert.ok(deps?.needed.includes('libstdc++.so.6'));
  });

  it('drops from the pinned Node.js what no loader reads (symbols, debug information, section headers); it runs the same', async () => {
    const original = await fs.readFile(NODE_BINARY);
    const trimmed = withoutUnmappedTail(original);
    assert.ok(trimmed.length < original.length - 10_000_000, `${trimmed.length} of ${original.length} bytes`);
    assert.deepEqual(elfDependencies(trimmed), elfDependencies(original));
    const header = (b: Buffer) => Buffer.concat([b.subarray(0, 0x28), b.subarray(0x30, 0x3c)]);
    assert.ok(header(trimmed).equals(header(original)), 'the ELF header but the section header fields');
    assert.ok(trimmed.subarray(0x40).equals(original.subarray(0x40, trimmed.length)), 'every mapped byte kept');
    assert.equal(trimmed.readBigUInt64LE(0x28), 0n);
    assert.equal(trimmed.readUInt16LE(0x3c), 0);
    assert.equal(withoutUnmappedTail(trimmed), trimmed, 'nothing more to drop');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'node-trimmed-'));
    try {
      const node = path.join(dir, 'node');
      await fs.writeFile(node, trimmed, { mode: 0o755 });
      const script =
        "const c = require('node:crypto'); console.log(JSON.stringify([process.versions, c.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.asymmetricKeyDetails, require('node:zlib').gunzipSync(require('node:zlib').gzipSync('x')).toString()]))";
      assert.equal(execFileSync(node, ['-e', script]).toString(), execFileSync(NODE_BINARY, ['-e', script]).toString());
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("reads a kernel module's dependencies from its .modinfo", () => {
    const ko = Buffer.concat([
      Buffer.from('\x7fELF....\0license=GPL\0depends=dm-mod,dm-bufio,async_xor\0vermagic=6.1\0'),
    ]);
    assert.deepEqual(moduleDepends(ko), ['dm-mod', 'dm-bufio', 'async_xor']);
    assert.deepEqual(moduleDepends(Buffer.from('\0depends=\0name=tun\0')), []);
  });

  describe('cloud formats', () => {
    it('Azure: a fixed VHD whose footer says the raw size (qemu-img reads it so), its checksum valid', async () => {
      const raw = path.join(dir, 'disk.raw');
      await fs.writeFile(raw, Buffer.alloc(3 * 1024 * 1024, 7));
      await writeFixedVhd(raw, path.join(dir, 'disk.vhd'));
      const vhd = await fs.readFile(path.join(dir, 'disk.vhd'));
      assert.equal(vhd.length, 3 * 1024 * 1024 + 512);
      const footer = vhd.subarray(-512);
      assert.equal(footer.toString('ascii', 0, 8), 'conectix');
      assert.equal(footer.readUInt32BE(60), 2, 'fixed disk');
      const copy = Buffer.from(footer);
      copy.writeUInt32BE(0, 64);
      assert.equal(footer.readUInt32BE(64), ~copy.reduce((a, b) => a + b, 0) >>> 0);
      const info = JSON.parse(
        execFileSync('qemu-img', [
          'info',
          '--output=json',
          '--image-opts',
          `driver=vpc,force_size_calc=current_size,file.filename=${path.join(dir, 'disk.vhd')}`,
        ]).toString(),
      ) as { 'virtual-size': number };
      assert.equal(info['virtual-size'], 3 * 1024 * 1024);
      await writeFixedVhd(raw, path.join(dir, 'again.vhd'));
      assert.ok(vhd.equals(await fs.readFile(path.join(dir, 'again.vhd'))), 'deterministic');
    });

    it('Azure: refuses a raw disk that is not a multiple of 1 MiB', async () => {
      await fs.writeFile(path.join(dir, 'odd.raw'), Buffer.alloc(1024 * 1024 + 512));
      await assert.rejects(writeFixedVhd(path.join(dir, 'odd.raw'), path.join(dir, 'odd.vhd')), /multiple of 1 MiB/);
    });

    it('VHD geometry follows the specification (a 1 GiB disk: 2080 cylinders, 16 heads, 63 sectors)', () => {
      assert.deepEqual(vhdGeometry(1024 * 1024 * 1024), { cylinders: 2080, heads: 16, sectorsPerTrack: 63 });
      assert.equal(vhdFooter(1024 * 1024 * 1024, Buffer.alloc(16)).length, 512);
    });

    it('GCE: disk.raw in a GNU tar, gzip-compressed, the same bytes twice', async () => {
      const raw = path.join(dir, 'x.raw');
      await fs.writeFile(raw, Buffer.alloc(1024 * 1024 + 100, 3));
      await writeGceTarball(raw, path.join(dir, 'a.tar.gz'));
      await writeGceTarball(raw, path.join(dir, 'b.tar.gz'));
      const listing = execFileSync('tar', ['-tvzf', path.join(dir, 'a.tar.gz')])
        .toString()
        .trim();
      assert.match(listing, /^-rw-r--r-- root\/root\s+1048676 1970-01-01 00:00 disk\.raw$/);
      assert.equal(
        execFileSync('sh', ['-c', `tar -xOzf ${path.join(dir, 'a.tar.gz')} disk.raw | sha256sum`])
          .toString()
          .split(' ')[0],
        sha256(await fs.readFile(raw)),
      );
      assert.ok((await fs.readFile(path.join(dir, 'a.tar.gz'))).equals(await fs.readFile(path.join(dir, 'b.tar.gz'))));
    });
  });

  it('GPT GUIDs are derived from the content: same digest, same GUID; RFC 4122 version 4 form', () => {
    assert.equal(derivedGuid('abc', 'disk'), derivedGuid('abc', 'disk'));
    assert.notEqual(derivedGuid('abc', 'disk'), derivedGuid('abc', 'esp'));
    assert.match(derivedGuid('abc', 'disk'), /^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$/);
  });

  it('the measurements: PCR 4, 9, 11 predicted, 8/12/13 zero and enforced, firmware PCRs warn only', () => {
    const m = imageMeasurements({ '4': 'a'.repeat(64), '9': 'b'.repeat(64), '11': 'c'.repeat(64) });
    assert.deepEqual(
      Object.keys(m)
        .map(Number)
        .sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 15],
    );
    assert.deepEqual(m['9'], { expected: 'b'.repeat(64), warnOnly: false });
    assert.deepEqual(m['12'], { expected: '0'.repeat(64), warnOnly: false });
    assert.equal(m['7'].warnOnly, true);
    assert.throws(() => imageMeasurements({ '4': 'a'.repeat(64), '9': 'b'.repeat(64) }), /no SHA-256 value for PCR 11/);
  });

  it('a missing build tool is named with the Debian package to install', async () => {
    const run: CommandRunner = async (_cmd, args) => ({
      code: /sgdisk|mcopy/.test(args.join(' ')) ? 1 : 0,
      stdout: '',
      stderr: '',
    });
    await assert.rejects(
      requireTools({ 'dpkg-deb': 'dpkg', mcopy: 'mtools', sgdisk: 'gdisk' }, run),
      (e: unknown) =>
        e instanceof UserError &&
        /needs mcopy, sgdisk/.test(e.message) &&
        /apt-get install mtools gdisk/.test(e.hint ?? ''),
    );
  });

  it('a package missing from the cache without download is an error naming how to fill the cache, and nothing is run', async () => {
    const calls: string[] = [];
    const run: CommandRunner = async (cmd) => {
      calls.push(cmd);
      return { code: 0, stdout: '', stderr: '' };
    };
    await assert.rejects(
      fetchPackages([{ name: 'etcd-server', version: '3.4.23-4+b4' }], { cacheDir: dir, run, download: false }),
      (e: unknown) =>
        e instanceof UserError &&
        /lacks 1 Debian package\(s\).*etcd-server=3\.4\.23-4\+b4/.test(e.message) &&
        /fetch-image-inputs/.test(e.hint ?? ''),
    );
    assert.deepEqual(calls, []);
  });

  it("a cached package is used as it is, with its .deb's SHA-256", async () => {
    await fs.writeFile(path.join(dir, 'libc6_2.36-9+deb12u14_amd64.deb'), 'deb bytes');
    const [pkg] = await fetchPackages([{ name: 'libc6', version: '2.36-9+deb12u14' }], {
      cacheDir: dir,
      run: async () => assert.fail('nothing runs'),
      download: true,
    });
    assert.equal(pkg.sha256, sha256(Buffer.from('deb bytes')));
  });

  describe('--kubernetes-binaries (with the stand-in kubeadm: real Kubernetes binaries are not installable here)', () => {
    async function binaries(withKubelet: boolean): Promise<string> {
      const standin = await installStandinKubeadm(path.join(dir, 'standin'));
      void standin;
      const bin = path.join(dir, 'standin', 'bin');
      if (withKubelet)
        await fs.writeFile(path.join(bin, 'kubelet'), '#!/bin/sh\necho kubelet stand-in\n', { mode: 0o755 });
      await fs.writeFile(path.join(bin, 'containerd'), '#!/bin/sh\necho containerd stand-in\n', { mode: 0o755 });
      await fs.mkdir(path.join(bin, 'images'));
      await fs.writeFile(path.join(bin, 'images', 'pause.tar'), 'image tarball');
      return bin;
    }

    it('puts kubeadm, kubelet, kubectl, containerd into /usr/bin and the image tarballs beside, each with its SHA-256', async () => {
      const tree = new RootTree(new Map());
      const inputs = await addKubernetesBinaries(tree, await binaries(true));
      assert.deepEqual(
        inputs.map((i) => i.path),
        ['kubeadm', 'kubelet', 'kubectl', 'containerd', 'images/pause.tar'],
      );
      const kubeadm = tree.nodes.get('usr/bin/kubeadm');
      assert.ok(kubeadm?.type === 'file' && kubeadm.mode === 0o755);
      assert.equal(inputs[0].sha256, sha256(await fs.readFile(path.join(dir, 'standin', 'bin', 'kubeadm'))));
      assert.ok(tree.nodes.has('usr/share/constellation/images/pause.tar'));
    });

    it('refuses a folder without kubelet, naming what it must hold', async () => {
      await assert.rejects(
        addKubernetesBinaries(new RootTree(new Map()), await binaries(false)),
        (e: unknown) =>
          e instanceof UserError && /lacks kubelet/.test(e.message) && /images\/\*\.tar/.test(e.hint ?? ''),
      );
    });

    it('the kernel command line selects the kubeadm backend with them and none without', () => {
      assert.match(
        kernelCommandLine('aws', 'kubeadm'),
        /constellation\.csp=aws constellation\.attestation-variant=aws-sev-snp constellation\.kubernetes-backend=kubeadm/,
      );
      assert.match(kernelCommandLine('gcp', 'none'), /constellation\.kubernetes-backend=none/);
    });
  });
});
