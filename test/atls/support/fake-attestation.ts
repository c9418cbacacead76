/**
 * A small software stand-in for a vTPM issuer/validator pair, shaped like the real thing: an "AK" (ECDSA
 * P-256) signs a quote over the qualifying data and a digest of the PCR values; the validator trusts only
 * registered AKs, checks the signature, the qualifying data, the PCR digest, then compares measurements.
 * It lets the channel tests run where no swtpm is available; the same cases also run against swtpm.
 */
import { createHash, generateKeyPairSync, sign, verify, createPublicKey, type KeyObject } from 'node:crypto';
import {
  AttestationError,
  type AttestationDocument,
  type Issuer,
  type Measurements,
  type PcrComparison,
  type ValidationResult,
  type Validator,
} from '../../../lib/attestation/types.js';

export const FAKE_VARIANT = 'test-fake-vtpm';

interface FakeQuote {
  qualifyingData: string;
  pcrDigest: string;
}

export class FakeAttester implements Issuer {
  readonly variant = FAKE_VARIANT;
  private readonly ak: KeyObject;
  readonly akPublic: string;

  constructor(readonly pcrs: Record<string, string>) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    this.ak = privateKey;
    this.akPublic = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  }

  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument> {
    const instanceInfo = Buffer.alloc(0);
    const quote: FakeQuote = {
      qualifyingData: qualifyingData(instanceInfo, userData, nonce),
      pcrDigest: pcrDigest(this.pcrs),
    };
    const quoteBytes = Buffer.from(JSON.stringify(quote));
    return {
      variant: FAKE_VARIANT,
      attestation: {
        akPublic: this.akPublic,
        quotes: [
          {
            hashAlg: 11,
            quote: quoteBytes.toString('base64'),
            signature: sign('sha256', quoteBytes, this.ak).toString('base64'),
            pcrs: { ...this.pcrs },
          },
        ],
      },
      instanceInfo: instanceInfo.toString('base64'),
      userData: Buffer.from(userData).toString('base64'),
    };
  }
}

export class FakeValidator implements Validator {
  readonly variant = FAKE_VARIANT;
  constructor(
    private readonly measurements: Measurements,
    private readonly trustedAks: string[],
  ) {}

  async validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult> {
    const att = document.attestation as {
      akPublic: string;
      quotes: Array<{ quote: string; signature: string; pcrs: Record<string, string> }>;
    };
    if (!this.trustedAks.includes(att.akPublic))
      throw new AttestationError('The attestation key is not registered for any instance.');
    const q = att.quotes[0];
    const quoteBytes = Buffer.from(q.quote, 'base64');
    const ak = createPublicKey({ key: Buffer.from(att.akPublic, 'base64'), format: 'der', type: 'spki' });
    if (!verify('sha256', quoteBytes, ak, Buffer.from(q.signature, 'base64')))
      throw new AttestationError('The quote signature is invalid.');
    let quote: FakeQuote;
    try {
      quote = JSON.parse(quoteBytes.toString()) as FakeQuote;
    } catch {
      throw new AttestationError('The quote is malformed.');
    }
    const userData = Buffer.from(document.userData, 'base64');
    if (quote.qualifyingData !== qualifyingData(Buffer.from(document.instanceInfo, 'base64'), userData, nonce)) {
      throw new AttestationError('The quote does not bind this nonce and userData.');
    }
    if (quote.pcrDigest !== pcrDigest(q.pcrs)) throw new AttestationError('The PCR values do not match the quote.');
    const comparisons: PcrComparison[] = Object.entries(this.measurements).map(([index, m]) => ({
      index: Number(index),
      expected: m.expected,
      actual: q.pcrs[index],
      warnOnly: m.warnOnly,
      match: q.pcrs[index] === m.expected,
    }));
    const enforced = comparisons.find((c) => !c.match && !c.warnOnly);
    if (enforced) {
      throw new AttestationError(
        `PCR ${enforced.index} does not match: expected ${enforced.expected}, got ${enforced.actual ?? 'nothing'}.`,
        comparisons,
      );
    }
    return {
      userData: new Uint8Array(userData),
      pcrs: new Map(Object.entries(q.pcrs).map(([i, v]) => [Number(i), Buffer.from(v, 'hex')])),
      comparisons,
      warnings: comparisons
        .filter((c) => !c.match)
        .map((c) => `PCR ${c.index} does not match (warnOnly): expected ${c.expected}, got ${c.actual}`),
    };
  }
}

function qualifyingData(instanceInfo: Uint8Array, userData: Uint8Array, nonce: Uint8Array): string {
  const inner = createHash('sha256').update(userData).update(nonce).digest();
  return createHash('sha256').update(instanceInfo).update(inner).digest('hex');
}

function pcrDigest(pcrs: Record<string, string>): string {
  const hash = createHash('sha256');
  for (const index of Object.keys(pcrs).sort((a, b) => Number(a) - Number(b)))
    hash.update(Buffer.from(pcrs[index], 'hex'));
  return hash.digest('hex');
}
