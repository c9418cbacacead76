/**
 * TDX quote verification: PCK certificate chain to Intel's SGX Root CA, the QE report signed by the PCK key,
 * the QE report binding the attestation key (REPORT_DATA = SHA-256(attestation key ‖ QE auth data) ‖ zeros),
 * the quote signed by the attestation key, then the TD's fields against the config (MRSEAM, TEE TCB SVN,
 * QE/PCE SVN minimums, no debug) and the REPORT_DATA binding the caller expects.
 *
 * Not checked: Intel's TCB info and QE identity collateral and the PCK revocation lists (these need Intel's
 * PCS online); the config's SVN minimums stand in for the TCB level. Like SNP, every failure is reported.
 */
import { createHash, createPublicKey, timingSafeEqual, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { CertificateError, readCertificate, signedBy, type ReadCertificate } from '../certificate.js';
import { AttestationError } from '../types.js';
import { certificatesDer, sha256Hex } from '../snp/certs.js';
import { INTEL_SGX_ROOT_CA } from './intel-root.js';
import { parseTdxQuote, TdxFormatError, type TdxQuote } from './quote.js';

export type TdxCheck =
  | 'format'
  | 'pck-chain'
  | 'validity'
  | 'qe-report-signature'
  | 'qe-report-data'
  | 'quote-signature'
  | 'debug'
  | 'mr-seam'
  | 'tee-tcb-svn'
  | 'qe-svn'
  | 'pce-svn'
  | 'report-data';

export interface TdxCheckFailure {
  check: TdxCheck;
  message: string;
}

export class TdxQuoteError extends AttestationError {
  constructor(readonly failures: TdxCheckFailure[]) {
    super(`TDX quote rejected: ${failures.map((f) => f.message).join('; ')}`, undefined, {
      hint: 'The quote does not come from a trusted, correctly configured TDX VM; see docs/cloud-attestation.md.',
    });
  }

  has(check: TdxCheck): boolean {
    return this.failures.some((f) => f.check === check);
  }
}

export interface VerifyTdxQuoteOptions {
  now?: Date;
  /** Expected MRSEAM (the TDX module's measurement), 48 bytes. */
  mrSeam?: Uint8Array;
  /** Minimum TEE TCB SVN, compared byte by byte (16 bytes). */
  teeTcbSvn?: Uint8Array;
  qeSvn?: number;
  pceSvn?: number;
  /** Expected REPORT_DATA; shorter values are compared as zero-padded to 64 bytes. */
  reportData?: Uint8Array;
}

export interface TdxVerifierOptions {
  /** Trusted root CAs, PEM (default: Intel's SGX Root CA). Tests pass their own. */
  roots?: string[];
}

interface PckChain {
  key: KeyObject;
  validity: { name: string; notBefore: number; notAfter: number }[];
}

const TD_ATTRIBUTES_DEBUG = 0x01;

function pad64(b: Uint8Array): Uint8Array {
  if (b.length > 64) throw new RangeError('expected REPORT_DATA is longer than 64 bytes');
  const out = new Uint8Array(64);
  out.set(b);
  return out;
}

/** The attestation key is a raw P-256 point (x ‖ y). */
function p256Key(point: Uint8Array): KeyObject {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url');
  return createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: b64(point.subarray(0, 32)), y: b64(point.subarray(32, 64)) },
    format: 'jwk',
  });
}

export class TdxVerifier {
  private readonly roots: Uint8Array[];
  private readonly cache = new Map<string, PckChain>();

  constructor(options: TdxVerifierOptions = {}) {
    this.roots = (options.roots ?? [INTEL_SGX_ROOT_CA]).flatMap((pem) => certificatesDer(pem));
  }

  verify(bytes: Uint8Array, options: VerifyTdxQuoteOptions = {}): TdxQuote {
    let quote: TdxQuote;
    try {
      quote = parseTdxQuote(bytes);
    } catch (err) {
      if (err instanceof TdxFormatError) throw new TdxQuoteError([{ check: 'format', message: err.message }]);
      throw err;
    }
    const failures: TdxCheckFailure[] = [];
    const fail = (check: TdxCheck, message: string) => failures.push({ check, message });

    const chain = this.pckChain(quote.pckChain, fail);
    if (chain) {
      const now = (options.now ?? new Date()).getTime();
      for (const w of chain.validity) {
        if (!(now >= w.notBefore && now <= w.notAfter))
          fail('validity', `the certificate ${w.name} is not valid at ${new Date(now).toISOString()}`);
      }
      if (
        !cryptoVerify(
          'sha256',
          quote.qeReport.raw,
          { key: chain.key, dsaEncoding: 'ieee-p1363' },
          quote.qeReportSignature,
        )
      ) {
        fail('qe-report-signature', 'the Quoting Enclave report is not signed by the PCK certificate');
      }
    }
    const expectedQeData = pad64(createHash('sha256').update(quote.attestationKey).update(quote.qeAuthData).digest());
    if (!timingSafeEqual(expectedQeData, quote.qeReport.reportData)) {
      fail('qe-report-data', "the Quoting Enclave report does not bind the quote's attestation key");
    }
    let attestationKey: KeyObject | undefined;
    try {
      attestationKey = p256Key(quote.attestationKey);
    } catch {
      fail('quote-signature', 'the attestation key is not a P-256 point');
    }
    if (
      attestationKey &&
      !cryptoVerify('sha256', quote.signed, { key: attestationKey, dsaEncoding: 'ieee-p1363' }, quote.signature)
    ) {
      fail('quote-signature', "the quote's signature does not verify with its attestation key");
    }

    const { body } = quote;
    if (body.tdAttributes[0] & TD_ATTRIBUTES_DEBUG)
      fail('debug', 'the TD runs in debug mode (the host can read its memory)');
    if (options.mrSeam && !Buffer.from(options.mrSeam).equals(body.mrSeam)) {
      fail(
        'mr-seam',
        `MRSEAM is ${Buffer.from(body.mrSeam).toString('hex')}, expected ${Buffer.from(options.mrSeam).toString('hex')}`,
      );
    }
    if (options.teeTcbSvn) {
      const low = [...options.teeTcbSvn].findIndex((min, i) => body.teeTcbSvn[i] < min);
      if (low >= 0)
        fail(
          'tee-tcb-svn',
          `TEE TCB SVN ${Buffer.from(body.teeTcbSvn).toString('hex')} is below the minimum ${Buffer.from(options.teeTcbSvn).toString('hex')} (component ${low})`,
        );
    }
    if (options.qeSvn !== undefined && quote.qeSvn < options.qeSvn)
      fail('qe-svn', `QE SVN ${quote.qeSvn} is below the minimum ${options.qeSvn}`);
    if (options.pceSvn !== undefined && quote.pceSvn < options.pceSvn)
      fail('pce-svn', `PCE SVN ${quote.pceSvn} is below the minimum ${options.pceSvn}`);
    if (options.reportData && !timingSafeEqual(pad64(options.reportData), body.reportData))
      fail('report-data', 'REPORT_DATA does not bind the expected data');
    if (failures.length > 0) throw new TdxQuoteError(failures);
    return quote;
  }

  /** Verifies PCK → intermediate(s) → a trusted root; cached by the chain's DER fingerprint when it verifies. */
  private pckChain(pem: string, fail: (check: TdxCheck, message: string) => void): PckChain | undefined {
    const ders = certificatesDer(pem);
    const cacheKey = sha256Hex(...ders);
    const hit = this.cache.get(cacheKey);
    if (hit) return hit;
    let read: ReadCertificate[];
    try {
      read = ders.map((d, i) => readCertificate(d, `certificate ${i} of the PCK chain`));
    } catch (err) {
      if (!(err instanceof CertificateError)) throw err;
      fail('pck-chain', err.message);
      return undefined;
    }
    const certs = read.map((r) => r.cert);
    if (certs.length < 2) {
      fail(
        'pck-chain',
        `the PCK certificate chain has ${certs.length} certificates; expected the PCK certificate, its CA and the root CA`,
      );
      return undefined;
    }
    const before = this.cache.size;
    let ok = true;
    const root = ders[ders.length - 1];
    if (!this.roots.some((r) => Buffer.from(r).equals(root))) {
      fail(
        'pck-chain',
        `the PCK chain's root (${certs[certs.length - 1].subject.replace(/\n/g, ', ')}) is not Intel's SGX Root CA`,
      );
      ok = false;
    }
    for (let i = 0; i < certs.length - 1; i++) {
      if (!certs[i + 1].ca || !signedBy(certs[i], read[i + 1].publicKey)) {
        fail('pck-chain', `certificate ${i} of the PCK chain is not issued by certificate ${i + 1}`);
        ok = false;
      }
    }
    const key = read[0].publicKey;
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
      fail('pck-chain', 'the PCK certificate does not hold an ECDSA P-256 key');
      ok = false;
    }
    const validity = read.map(({ cert: c, notBefore, notAfter }) => ({
      name:
        c.subject
          .split('\n')
          .find((l) => l.startsWith('CN='))
          ?.slice(3) ?? c.subject,
      notBefore,
      notAfter,
    }));
    if (!ok) return undefined;
    const chain = { key, validity };
    if (before >= 256) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(cacheKey, chain);
    return chain;
  }
}

const defaultVerifier = new TdxVerifier();

/** Verifies a TDX quote v4 against Intel's SGX Root CA. Throws TdxQuoteError naming every failed check. */
export function verifyTdxQuote(quote: Uint8Array, options: VerifyTdxQuoteOptions = {}): TdxQuote {
  return defaultVerifier.verify(quote, options);
}
