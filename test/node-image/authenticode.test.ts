import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { authenticodeDigest } from '../../lib/node-image/authenticode.js';
import { parsePe } from '../../lib/node-image/pe.js';
import { assembleUki } from '../../lib/node-image/uki.js';

const stub = readFileSync('/usr/lib/systemd/boot/efi/linuxx64.efi.stub');

/** Signs `file` with a throwaway key (osslsigncode) and returns the digest osslsigncode computes when verifying. */
function osslsigncodeDigest(dir: string, file: string): { signed: string; digest: string } {
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      '/CN=authenticode test',
      '-days',
      '1',
    ],
    { stdio: 'pipe' },
  );
  const signed = `${file}.signed`;
  execFileSync('osslsigncode', ['sign', '-certs', cert, '-key', key, '-h', 'sha256', '-in', file, '-out', signed], {
    stdio: 'pipe',
  });
  let out: string;
  try {
    out = execFileSync('osslsigncode', ['verify', '-in', signed], { encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    // verify exits non-zero for an untrusted self-signed certificate; the digests are printed all the same.
    out = String((err as { stdout?: string }).stdout);
  }
  const digest = /Calculated message digest\s*:\s*([0-9A-F]{64})/.exec(out)?.[1];
  assert.ok(digest, `osslsigncode printed no digest:\n${out}`);
  return { signed, digest: digest.toLowerCase() };
}

describe('authenticodeDigest (the PE digest firmware measures into PCR 4)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'authenticode-test-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("equals osslsigncode's digest of a UKI we assembled, before and after signing", () => {
    const file = path.join(dir, 'uki.efi');
    const uki = assembleUki(stub, {
      linux: stub,
      osrel: 'ID=t\n',
      cmdline: 'console=ttyS0',
      initrd: Buffer.from('x'.repeat(1000)),
    });
    writeFileSync(file, uki);
    const { signed, digest } = osslsigncodeDigest(dir, file);
    assert.equal(authenticodeDigest(uki).toString('hex'), digest);
    const signedBytes = readFileSync(signed);
    assert.ok(parsePe(signedBytes).certificateTable.size > 0, 'osslsigncode added a certificate table');
    assert.equal(authenticodeDigest(signedBytes).toString('hex'), digest, 'a signature does not change the digest');
  });

  it("equals osslsigncode's digest of a signed image with bytes after its last section (the bare stub)", () => {
    // The stub keeps a COFF symbol table after its sections: hashed as trailing data, as firmware does.
    const file = path.join(dir, 'stub.efi');
    writeFileSync(file, stub);
    const { signed, digest } = osslsigncodeDigest(dir, file);
    assert.equal(authenticodeDigest(readFileSync(signed)).toString('hex'), digest);
  });

  it('does not depend on the CheckSum field', () => {
    const uki = assembleUki(stub, { linux: stub, osrel: 'ID=t\n', cmdline: 'x', initrd: Buffer.from('y') });
    const changed = Buffer.from(uki);
    changed.writeUInt32LE(0xdeadbeef, parsePe(uki).checksumOffset);
    assert.deepEqual(authenticodeDigest(changed), authenticodeDigest(uki));
  });
});
