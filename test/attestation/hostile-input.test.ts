/**
 * Hostile inputs that a first random-mutation run found (issue 13, item 8): parsers that were quadratic in their
 * input (each blocked the join service's event loop before any signature was checked) and failures that escaped
 * as plain exceptions from functions documented to throw our typed errors. One case per finding; each failed
 * before its fix. The slow inputs are 1 MiB and must parse in well under 100 ms; the bound asserted is a
 * generous 2 s, so that this is no timing test but still catches quadratic work (which takes minutes at 1 MiB).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAttestationDocument } from '../../lib/atls/document.js';
import { EventLogError, parseEventLog } from '../../lib/attestation/eventlog.js';
import { certificatesDer } from '../../lib/attestation/snp/certs.js';
import { SnpReportError, SnpVerifier } from '../../lib/attestation/snp/verify.js';
import { parseTdxQuote } from '../../lib/attestation/tdx/quote.js';
import { verifyTpmQuote } from '../../lib/attestation/tpm-quote.js';
import { AttestationError } from '../../lib/attestation/types.js';
import { ConfigError } from '../../lib/config/errors.js';
import { parseConfig } from '../../lib/config/parse.js';
import { bitString, oid, sequence } from '../../lib/der.js';
import { UserError } from '../../lib/errors.js';
import { AK_TEMPLATE } from '../../lib/tpm/client.js';
import { TpmFormatError } from '../../lib/tpm/marshal.js';
import { encodeTpmPublic, publicKeyFromTpmPublic, type TpmPublic } from '../../lib/tpm/structures.js';
import { parseState } from '../../lib/workspace/state.js';
import { TESTDATA } from '../support/testdata.js';
import { makeSnpTestCa } from './snp/fixtures.js';
import { makeCert, tlvTime } from './snp/test-ca.js';
import { makeTdxQuote, makeTdxTestCa } from './tdx/fixtures.js';
import { generateKeyPairSync } from 'node:crypto';

const MiB = 1024 * 1024;
/** Far above the < 100 ms these parsers need for 1 MiB, far below the minutes quadratic work takes. */
const LINEAR_BOUND_MS = 2000;

function within<T>(what: string, fn: () => T): T {
  const start = performance.now();
  try {
    return fn();
  } finally {
    const ms = performance.now() - start;
    assert.ok(
      ms < LINEAR_BOUND_MS,
      `${what} took ${ms.toFixed(0)} ms for 1 MiB of hostile input: its parsing is not linear`,
    );
  }
}

const azureReport = readFileSync(path.join(TESTDATA, 'attestation/azure-sev-snp/attestation.bin')).subarray(0, 1184);

describe('parsers of attacker-controlled bytes: hostile inputs', () => {
  describe('linear time on 1 MiB', () => {
    it('TDX: a PCK chain of a 1 MiB NUL run that does not end the chain (the trailing-NUL regex retried from every NUL)', () => {
      const chain = `${'\0'.repeat(MiB)}x`;
      const quote = makeTdxQuote(makeTdxTestCa(), { pckChain: chain });
      const parsed = within('parseTdxQuote', () => parseTdxQuote(quote));
      assert.equal(parsed.pckChain.length, MiB + 1);
    });

    it('TDX: trailing NULs are still stripped', () => {
      const ca = makeTdxTestCa();
      assert.equal(parseTdxQuote(makeTdxQuote(ca, { pckChain: `${ca.pckChain}\0\0\0` })).pckChain, ca.pckChain);
    });

    it('PEM: 1 MiB of BEGIN lines without an END (the lazy regex rescanned the rest from every BEGIN)', () => {
      const pem = '-----BEGIN CERTIFICATE-----\n'.repeat(MiB / 28);
      assert.deepEqual(
        within('certificatesDer', () => certificatesDer(pem)),
        [],
      );
      assert.throws(
        () =>
          within('SnpVerifier.verify', () =>
            new SnpVerifier().verify(azureReport, { signingCert: pem, certChain: pem }),
          ),
        (err: Error) => err instanceof SnpReportError && err.has('format'),
      );
    });

    it('PEM: still splits a chain, ignoring text between blocks', () => {
      const ca = makeSnpTestCa();
      const ders = certificatesDer(`garbage\n${ca.ask.pem}between\n${ca.ark.pem}after`);
      assert.deepEqual(
        ders.map((d) => Buffer.from(d).toString('hex')),
        [ca.ask.der, ca.ark.der].map((d) => Buffer.from(d).toString('hex')),
      );
    });

    it('event log: 1 MiB of zero-filled events that is not padding (the padding check rescanned the rest per event)', () => {
      const events = MiB / 16;
      const log = Buffer.concat([specIdHeader(), Buffer.alloc(events * 16), emptyEvent(Buffer.of(1))]);
      const parsed = within('parseEventLog', () => parseEventLog(log));
      assert.equal(parsed.events.length, events + 1);
    });

    it('event log: trailing zero or 0xff padding still ends the log', () => {
      for (const fill of [0x00, 0xff]) {
        const log = Buffer.concat([specIdHeader(), emptyEvent(Buffer.of(7)), Buffer.alloc(4096, fill)]);
        assert.equal(parseEventLog(log).events.length, 1);
      }
    });
  });

  describe('typed errors, never another exception', () => {
    const ca = makeSnpTestCa();
    const vcekKeys = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const vcek = (spec: { spki?: Uint8Array; notBeforeRaw?: Uint8Array }) =>
      makeCert({
        subject: 'SEV-VCEK',
        issuer: `SEV-${ca.product}`,
        publicKey: vcekKeys.publicKey,
        signingKey: ca.askKey,
        signature: 'rsa-pss-sha384',
        ...spec,
      }).der;
    const verifier = new SnpVerifier({ roots: ca.roots });

    it('a certificate whose public key does not decode is an SnpReportError, not a plain Error', () => {
      const undecodable = sequence(
        sequence(oid('1.2.840.10045.2.1'), oid('1.3.132.0.34')),
        bitString(Buffer.concat([Buffer.of(4), Buffer.alloc(96, 1)])),
      );
      assert.throws(
        () => verifier.verify(azureReport, { signingCert: vcek({ spki: undecodable }), certChain: ca.vcekChain }),
        (err: Error) =>
          err instanceof SnpReportError &&
          err.has('format') &&
          /the VCEK\/VLEK certificate holds a public key that cannot be decoded/.test(err.message),
      );
    });

    it('an unreadable validity date is an SnpReportError, not a RangeError from the message', () => {
      assert.throws(
        () =>
          verifier.verify(azureReport, {
            signingCert: vcek({ notBeforeRaw: tlvTime('241301000000Z') }),
            certChain: ca.vcekChain,
          }),
        (err: Error) => err instanceof SnpReportError && /has a validity date that cannot be read/.test(err.message),
      );
    });

    it('an ECC TPM key whose point is off its curve is a TpmFormatError (and an AttestationError in a quote), not a TypeError', () => {
      const template = AK_TEMPLATE as Extract<TpmPublic, { unique: { x: Uint8Array } }>;
      const offCurve: TpmPublic = {
        ...template,
        unique: { x: new Uint8Array(32).fill(1), y: new Uint8Array(32).fill(1) },
      };
      assert.throws(
        () => publicKeyFromTpmPublic(offCurve),
        (err: Error) => err instanceof TpmFormatError && /not on the curve/.test(err.message),
      );
      assert.throws(
        () =>
          verifyTpmQuote({
            akPublic: encodeTpmPublic(offCurve),
            quote: new Uint8Array(0),
            signature: new Uint8Array(0),
            pcrs: new Map(),
            hashAlg: 11,
            qualifyingData: new Uint8Array(32),
          }),
        (err: Error) => err instanceof AttestationError,
      );
    });

    it('"constructor": null inside an attestation document is an AttestationError, not a TypeError from zod', () => {
      for (const text of [
        '{"variant":"local-vtpm","attestation":{"constructor":null},"instanceInfo":"","userData":""}',
        '{"variant":"local-vtpm","attestation":{"quotes":[{"pcrs":{"constructor":null}}]},"instanceInfo":"","userData":""}',
        '{"constructor":null}',
      ]) {
        assert.throws(
          () => parseAttestationDocument(text),
          (err: Error) =>
            err instanceof AttestationError && /has the key ".*constructor", which is not allowed/.test(err.message),
          text,
        );
      }
    });

    it('"constructor": null in a config or state file is our error, not a TypeError', () => {
      assert.throws(
        () => parseConfig('version: v4\nconstructor: null\n'),
        (err: Error) => err instanceof ConfigError && /constructor/.test(err.message),
      );
      assert.throws(
        () => parseState('version: v1\ninfrastructure:\n  constructor: null\n'),
        (err: Error) => err instanceof UserError && /constructor/.test(err.message),
      );
    });

    it('an event log that is only a header parses; a truncated one is an EventLogError', () => {
      assert.equal(parseEventLog(specIdHeader()).events.length, 0);
      assert.throws(() => parseEventLog(specIdHeader().subarray(0, 40)), EventLogError);
    });
  });
});

/** The crypto-agile log's first event (SHA-1 format) with a Spec ID Event03 listing the SHA-256 bank. */
function specIdHeader(): Buffer {
  const spec = Buffer.concat([
    Buffer.from('Spec ID Event03\0', 'latin1'),
    u32(0),
    Buffer.of(0, 2, 0, 2),
    u32(1),
    u16(0x0b),
    u16(32),
    Buffer.of(0),
  ]);
  return Buffer.concat([u32(0), u32(3), Buffer.alloc(20), u32(spec.length), spec]);
}

/** An event for PCR 0 of type 0 with no digests and `data`. */
function emptyEvent(data: Buffer): Buffer {
  return Buffer.concat([u32(0), u32(0), u32(0), u32(data.length), data]);
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}

function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
}
