import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  certificateFields,
  children,
  decodeOid,
  decodeSmallInteger,
  DerError,
  oid,
  readElement,
  readOnly,
  sequence,
  TAG,
  time,
  unsignedInteger,
} from '../lib/der.js';
import { TESTDATA } from './support/testdata.js';

describe('der', () => {
  it('round-trips object identifiers with multi-byte arcs', () => {
    for (const dotted of ['1.2.840.113549.1.1.10', '2.5.29.19', '1.3.6.1.4.1.3704.1.3.1', '2.999.3']) {
      assert.equal(decodeOid(readElement(oid(dotted))), dotted);
    }
  });

  it('encodes non-negative integers minimally, with a 0x00 before a set top bit', () => {
    assert.deepEqual([...unsignedInteger(Buffer.of(0, 0, 0x7f))], [0x02, 0x01, 0x7f]);
    assert.deepEqual([...unsignedInteger(Buffer.of(0x80))], [0x02, 0x02, 0x00, 0x80]);
    assert.equal(decodeSmallInteger(readElement(unsignedInteger(Buffer.of(1, 0)))), 256);
    assert.throws(() => decodeSmallInteger(readElement(Buffer.of(0x02, 0x01, 0xff))), DerError);
  });

  it('writes UTCTime through 2049 and GeneralizedTime from 2050', () => {
    assert.equal(time(new Date('2049-12-31T23:59:59Z')).toString('latin1'), '\x17\x0d491231235959Z');
    assert.equal(time(new Date('2050-01-01T00:00:00Z')).toString('latin1'), '\x18\x0f20500101000000Z');
  });

  it('refuses elements that run past their container, and trailing bytes where the whole input is one element', () => {
    const long = sequence(Buffer.alloc(300));
    assert.equal(readElement(long).content.length, 300);
    assert.throws(() => readElement(long.subarray(0, 100)), DerError);
    assert.throws(() => readElement(Buffer.of(0x30, 0x84, 1, 0, 0, 0)), DerError);
    assert.throws(() => children(readElement(Buffer.of(0x30, 0x02, 0x04, 0x05))), DerError);
    assert.throws(() => readOnly(Buffer.concat([long, Buffer.of(0)]), TAG.SEQUENCE, 'x'), /trailing bytes/);
    assert.throws(() => decodeOid(readElement(Buffer.of(0x06, 0x01, 0x81))), /truncated/);
  });

  it('reads the subject, key, signature algorithm and extensions of a real certificate (AMD VCEK)', () => {
    const der = readFileSync(path.join(TESTDATA, 'attestation/azure-sev-snp/vcek.cert'));
    const fields = certificateFields(readOnly(der, TAG.SEQUENCE, 'certificate'));
    const cert = new X509Certificate(der);
    assert.deepEqual(fields.publicKey.raw, cert.publicKey.export({ type: 'spki', format: 'der' }));
    assert.equal(decodeOid(children(fields.signatureAlgorithm)[0]), '1.2.840.113549.1.1.10'); // RSASSA-PSS
    assert.match(fields.subject.raw.toString('latin1'), /SEV-VCEK/);
    assert.equal(readElement(fields.extensions.get('1.3.6.1.4.1.3704.1.2')!).content.toString('latin1'), 'Milan-B0');
  });
});
