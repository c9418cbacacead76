import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { authenticodeDigest } from '../../lib/node-image/authenticode.js';
import {
  predictBootMeasurements,
  predictBootMeasurementsOfFile,
  stubLoadOptions,
} from '../../lib/node-image/measure.js';
import { assembleUki } from '../../lib/node-image/uki.js';
import { runCli } from '../support/cli.js';
import { writeEspDisk } from '../support/esp-disk.js';
import { TESTDATA } from '../support/testdata.js';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const extend = (pcr: string, digest: string) =>
  sha256(Buffer.concat([Buffer.from(pcr, 'hex'), Buffer.from(digest, 'hex')]));
const ZERO = '0'.repeat(64);

// Upstream's image/measured-boot/extract/extract_test.go (TestPeFileSectionDigests): name, VirtualSize, SHA-256.
const UPSTREAM_FIXTURE_SECTIONS: [string, number, string][] = [
  ['.linux', 0x1f8, '01e5cee2d18eaace36b5bc394f7031aae1668e4a7f7cc0e949525ea65c40f795'],
  ['.osrel', 0x2b0, '6583801da29b3b740f0eb0c427d5b8520bfbf7ff6369c22ef2f4c480f0ea99fc'],
  ['.cmdline', 0x94, 'f047d03a36f0de1f77916c2aab8877a9d880acf917683cc77b7c01df18b131c7'],
  ['.initrd', 0x12, '4e50306a0784471f02de7e54d90fdca10e8e12eccc2d7a9d9702f6e738e1c2ca'],
  ['.splash', 0x12, '36b5f482372e5049839d176cf4d14acbfdfedac1bf77ea0ea4b172a876ae2d2e'],
  ['.dtb', 0xf, '46a00153cad99d194af11448305c8ca1872abae920ee423c193501050f36e78d'],
  ['.pcrkey', 0x12, '354b67d5a3ef2affdadb3dfc1f8bd0f669d086a6d67d5fee88db2190c4a70726'],
  ['.data', 0x10, 'c3de14ca1645875e3bb0ddab9f609146f21cc0ebd0ea9b4f22d39840c0ea29c5'],
  ['.dynamic', 0x13, '2b7529c83a74bcb0ac631518a11495101a8d8e406993ed05ed8acc2d88ec1379'],
  ['.dynsym', 0x12, 'b60a7d6569eba3d99eec1332572b6119320b571b43c19675375a8576daf78124'],
  ['.rela', 0x10, '1cd6fb4fb874fdb2f3b7f53dc18c5b8e5ba14d006c56415e9b8e221dbf59dd9d'],
  ['.reloc', 0xa, '4ffadb1dbde92dce2137ae1e2474ad09f27b62e4bba5ccc6490ab0da45fa45c3'],
  ['.sbat', 0x10, '6630fb7d5baf9d6cd51c9ac95410e68aa3fedb4addd42b340e4711e23cccd4b2'],
  ['.sdmagic', 0x2d, 'c102120de9fa6243f216ddb45828e2a2b64a658230d0cae6c2f2983967babe95'],
  ['.text', 0x10, 'af54419a3fbe760cf7d36a8637f01d13d44bb5f39215e22ead521551fae42f2d'],
  ['.uname', 0x22, '32d59d990e9c1f7da554cb888e3238ac6193e5e7230f99b197138dd723c0ebb6'],
  ['.pcrsig', 0x216, 'cc41a548bd0203174939f50c3df17759b813b531b0563e9120556cf72501a326'],
];

const stub = readFileSync('/usr/lib/systemd/boot/efi/linuxx64.efi.stub');
// A stand-in kernel that is a real PE image (the stub itself), so PCR 4's kernel stage has an Authenticode digest.
const inputs = {
  linux: stub,
  osrel: 'ID=constellation\n',
  cmdline: 'console=ttyS0 constellation.provider=qemu',
  initrd: Buffer.from('initrd bytes'),
};

describe('image measure', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'image-measure-test-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("lists the section digests upstream's extract_test.go expects for upstream's UKI fixture", async () => {
    const res = await runCli(['image', 'measure', path.join(TESTDATA, 'measured-boot/uki.efi')]);
    const listed = new Map(
      [...res.stdout.matchAll(/^\s+(\.\S+)\s+(\d+) bytes\s+([0-9a-f]{64})/gm)].map((m) => [
        m[1]!,
        [Number(m[2]), m[3]],
      ]),
    );
    assert.equal(listed.size, UPSTREAM_FIXTURE_SECTIONS.length, res.stdout);
    for (const [name, size, digest] of UPSTREAM_FIXTURE_SECTIONS)
      assert.deepEqual(listed.get(name), [size, digest], name);
    // The fixture's .linux is no kernel: firmware would not start it, and image measure says so instead of guessing PCR 4.
    assert.equal(res.code, 1);
    assert.match(res.stderr, /\.linux section is not an EFI-stub kernel/);
    assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
  });

  it('predicts each PCR as the replay of its listed events, with 8, 12 and 13 zero', () => {
    const p = predictBootMeasurements(assembleUki(stub, inputs));
    for (const pcr of [4, 8, 9, 11, 12, 13]) {
      const value = p.events.filter((e) => e.pcr === pcr).reduce((acc, e) => extend(acc, e.digest), ZERO);
      assert.equal(p.pcrs[pcr], value, `PCR ${pcr}`);
    }
    for (const pcr of [8, 12, 13]) assert.equal(p.pcrs[pcr], ZERO);
  });

  it("lists the events in boot order: firmware stages, the stub's sections, the kernel stage, then the Linux stub's two", () => {
    const uki = assembleUki(stub, inputs);
    const p = predictBootMeasurements(uki);
    const loadOptions = Buffer.from(`${inputs.cmdline}\0`, 'utf16le');
    assert.deepEqual(
      p.events.map((e) => [e.pcr, e.type, e.digest]),
      [
        [4, 'EV_EFI_ACTION', sha256('Calling EFI Application from Boot Option')],
        [4, 'EV_SEPARATOR', sha256(Buffer.alloc(4))],
        [4, 'EV_EFI_BOOT_SERVICES_APPLICATION', authenticodeDigest(uki).toString('hex')],
        [11, 'EV_IPL', sha256('.linux\0')],
        [11, 'EV_IPL', sha256(stub)],
        [11, 'EV_IPL', sha256('.osrel\0')],
        [11, 'EV_IPL', sha256(inputs.osrel)],
        [11, 'EV_IPL', sha256('.cmdline\0')],
        [11, 'EV_IPL', sha256(inputs.cmdline)],
        [11, 'EV_IPL', sha256('.initrd\0')],
        [11, 'EV_IPL', sha256(inputs.initrd)],
        [4, 'EV_EFI_BOOT_SERVICES_APPLICATION', authenticodeDigest(stub).toString('hex')],
        [9, 'EV_EVENT_TAG', sha256(loadOptions)],
        [9, 'EV_EVENT_TAG', sha256(inputs.initrd)],
      ],
    );
  });

  it('gives the same prediction for the raw disk as for the UKI on it', () => {
    const uki = assembleUki(stub, inputs);
    const disk = path.join(dir, 'disk.raw');
    writeEspDisk(disk, uki);
    const fromDisk = predictBootMeasurementsOfFile(disk);
    assert.deepEqual(fromDisk.source, { kind: 'disk', path: '\\EFI\\BOOT\\BOOTX64.EFI', partition: 1 });
    assert.deepEqual(fromDisk.pcrs, predictBootMeasurements(uki).pcrs);
    assert.deepEqual(predictBootMeasurements(readFileSync(disk)).pcrs, fromDisk.pcrs);
  });

  const changes: [string, Partial<typeof inputs>, number[]][] = [
    ['one byte of the initrd', { initrd: Buffer.from('initrd bytez') }, [4, 9, 11]],
    ['the command line', { cmdline: `${inputs.cmdline} quiet` }, [4, 9, 11]],
    ['os-release', { osrel: 'ID=other\n' }, [4, 11]],
  ];
  for (const [what, change, moved] of changes) {
    it(`changes exactly PCRs ${moved.join(', ')} when ${what} changes`, () => {
      const before = predictBootMeasurements(assembleUki(stub, inputs)).pcrs;
      const after = predictBootMeasurements(assembleUki(stub, { ...inputs, ...change })).pcrs;
      assert.deepEqual(
        Object.keys(after)
          .map(Number)
          .filter((pcr) => after[pcr] !== before[pcr]),
        moved,
      );
    });
  }

  it('hands the kernel the command line as systemd-stub does: UTF-16LE up to the first NUL, NUL-terminated', () => {
    assert.deepEqual(stubLoadOptions(Buffer.from('a b\0junk')), Buffer.from('a b\0', 'utf16le'));
    assert.throws(() => stubLoadOptions(Buffer.from('caf\xe9', 'latin1')), UserError);
  });

  it('prints {pcrs, events} with --json', async () => {
    const file = path.join(dir, 'uki.efi');
    writeFileSync(file, assembleUki(stub, inputs));
    const res = await runCli(['image', 'measure', file, '--json']);
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as {
      pcrs: Record<string, string>;
      events: { pcr: number; type: string; digest: string; description: string }[];
    };
    assert.deepEqual(Object.keys(out.pcrs), ['4', '8', '9', '11', '12', '13']);
    assert.deepEqual(out.pcrs, predictBootMeasurements(readFileSync(file)).pcrs);
    assert.deepEqual(Object.keys(out.events[0]!), ['pcr', 'type', 'digest', 'description']);
  });

  const bad: [string, (dir: string) => string, RegExp][] = [
    [
      'a text file',
      (d) => {
        writeFileSync(path.join(d, 'x.txt'), 'hello\n'.repeat(200));
        return path.join(d, 'x.txt');
      },
      /neither a raw GPT disk nor a PE image/,
    ],
    [
      'an EFI application that is no UKI',
      () => '/usr/lib/systemd/boot/efi/linuxx64.efi.stub',
      /not a unified kernel image/,
    ],
    ['a missing file', (d) => path.join(d, 'missing.raw'), /cannot read .*ENOENT/],
    [
      'a GPT disk without \\EFI\\BOOT\\BOOTX64.EFI',
      (d) => {
        writeEspDisk(path.join(d, 'd.raw'), Buffer.from('x'), { filePath: '::/EFI/other.efi' });
        return path.join(d, 'd.raw');
      },
      /has no \\EFI\\BOOT\\BOOTX64\.EFI/,
    ],
  ];
  for (const [what, make, message] of bad) {
    it(`refuses ${what} with a message and hint, no stack trace`, async () => {
      const res = await runCli(['image', 'measure', make(dir)]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, message);
      assert.match(res.stderr, /Hint:/);
      assert.doesNotMatch(res.stderr, /\n\s+at /);
    });
  }
});
