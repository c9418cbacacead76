import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { parsePe, peChecksum, PeFormatError } from '../../lib/node-image/pe.js';
import { assembleUki, ukiSections } from '../../lib/node-image/uki.js';

const STUB_PATH = '/usr/lib/systemd/boot/efi/linuxx64.efi.stub';
const stub = readFileSync(STUB_PATH);
// A stand-in kernel: any bytes work for layout; the boot test uses Debian's kernel.
const kernel = Buffer.alloc(3 * 4096 + 17, 0xab);
const inputs = {
  linux: kernel,
  osrel: 'ID=constellation\n',
  cmdline: 'console=ttyS0 constellation.provider=qemu',
  initrd: Buffer.from('initrd bytes'),
};

describe('assembleUki (systemd-stub + sections, like ukify)', () => {
  it("reads back every section with the exact bytes given, after the stub's own sections", () => {
    const uki = assembleUki(stub, { ...inputs, uname: '6.1.0-test' });
    const sections = ukiSections(uki);
    const byName = new Map(sections.map((s) => [s.name, s]));
    assert.deepEqual(byName.get('.linux')?.data, kernel);
    assert.equal(byName.get('.osrel')?.data.toString(), inputs.osrel);
    assert.equal(byName.get('.cmdline')?.data.toString(), inputs.cmdline);
    assert.deepEqual(byName.get('.initrd')?.data, inputs.initrd);
    assert.equal(byName.get('.uname')?.data.toString(), '6.1.0-test');
    assert.deepEqual(
      sections.slice(0, parsePe(stub).numberOfSections).map((s) => s.name),
      parsePe(stub).sections.map((s) => s.name),
    );
  });

  it('is deterministic: the same inputs give the same bytes', () => {
    assert.deepEqual(assembleUki(stub, inputs), assembleUki(stub, { ...inputs, initrd: Buffer.from(inputs.initrd) }));
  });

  it('lays sections out page-aligned in memory, FileAlignment-aligned in the file, with SizeOfImage and CheckSum fixed', () => {
    const uki = assembleUki(stub, inputs);
    const pe = parsePe(uki);
    let lastEnd = 0;
    for (const s of pe.sections) {
      assert.ok(s.virtualAddress >= lastEnd, `${s.name} overlaps the section before it`);
      lastEnd = s.virtualAddress + s.virtualSize;
      assert.equal(s.pointerToRawData % pe.fileAlignment, 0);
      assert.equal(s.sizeOfRawData % pe.fileAlignment, 0);
    }
    for (const s of pe.sections.slice(parsePe(stub).numberOfSections)) assert.equal(s.virtualAddress % 4096, 0);
    assert.equal(pe.sizeOfImage, Math.ceil(lastEnd / 4096) * 4096);
    const last = pe.sections.at(-1)!;
    assert.equal(uki.length, last.pointerToRawData + last.sizeOfRawData, 'no bytes after the last section');
    assert.equal(pe.pointerToSymbolTable, 0);
    assert.equal(uki.readUInt32LE(pe.checksumOffset), peChecksum(uki, pe.checksumOffset));
  });

  it('gives an image objdump reads with the same section table', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'uki-test-'));
    try {
      const file = path.join(dir, 'uki.efi');
      writeFileSync(file, assembleUki(stub, inputs));
      const out = execFileSync('objdump', ['-h', file], { encoding: 'utf8' });
      const names = [...out.matchAll(/^\s+\d+\s+(\.\S+)\s+([0-9a-f]{8})\s+([0-9a-f]{16})/gm)].map((m) => [
        m[1],
        parseInt(m[2]!, 16),
        parseInt(m[3]!, 16),
      ]);
      assert.deepEqual(
        names,
        parsePe(readFileSync(file)).sections.map((s) => [s.name, s.virtualSize, s.virtualAddress]),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a stub that is already a UKI, naming the sections', () => {
    const uki = assembleUki(stub, inputs);
    assert.throws(
      () => assembleUki(uki, inputs),
      (e: unknown) => e instanceof UserError && /\.linux/.test(e.message),
    );
  });

  it('grows the headers when the stub has no room for all new section headers, keeping every section intact', () => {
    const extraSections = Array.from({ length: 12 }, (_, i) => ({ name: `.x${i}`, data: `extra ${i}` }));
    const uki = assembleUki(stub, inputs, { extraSections });
    const pe = parsePe(uki);
    assert.ok(pe.sizeOfHeaders > parsePe(stub).sizeOfHeaders, 'headers grew');
    const byName = new Map(ukiSections(uki).map((s) => [s.name, s.data]));
    assert.deepEqual(
      byName.get('.text'),
      ukiSections(stub).find((s) => s.name === '.text')?.data,
      "the stub's code moved with its header",
    );
    assert.equal(byName.get('.x11')?.toString(), 'extra 11');
    assert.deepEqual(byName.get('.linux'), kernel);
    assert.ok(pe.sectionTableOffset + pe.numberOfSections * 40 <= pe.sizeOfHeaders);
  });

  it('refuses a command line with control characters (a trailing newline): its PCR 9 event is not predicted', () => {
    assert.throws(() => assembleUki(stub, { ...inputs, cmdline: 'console=ttyS0\n' }), UserError);
  });

  it('refuses a PE section that claims gigabytes of zero-fill (a fuzz finding: it made image measure hash for seconds)', () => {
    const hostile = Buffer.from(stub);
    hostile.writeUInt32LE(0xf0000000, parsePe(stub).sections[0]!.headerOffset + 8); // .text VirtualSize
    assert.throws(
      () => parsePe(hostile),
      (e: unknown) => e instanceof PeFormatError && /bytes in memory/.test(e.message),
    );
  });

  it('refuses a file that is not a PE image with a UserError', () => {
    assert.throws(
      () => assembleUki(Buffer.from('not a PE file at all, just some text bytes to be long enough'), inputs),
      UserError,
    );
  });
});
