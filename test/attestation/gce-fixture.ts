/** The real Google Compute Engine vTPM evidence of test/testdata/attestation/gce-vtpm/ (see its README). */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TESTDATA } from '../support/testdata.js';

interface GceJson {
  akPubHex: string;
  eventLogHex: string;
  quotes: { hashAlg: number; quoteHex: string; rawSigHex: string; pcrs: Record<string, string> }[];
}

const raw = JSON.parse(
  readFileSync(path.join(TESTDATA, 'attestation/gce-vtpm/gce-cos-85-no-nonce.json'), 'utf8'),
) as GceJson;

const hex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));

export const gce = {
  akPublic: hex(raw.akPubHex),
  eventLog: hex(raw.eventLogHex),
  quote(hashAlg: number) {
    const q = raw.quotes.find((x) => x.hashAlg === hashAlg)!;
    return {
      hashAlg,
      quote: hex(q.quoteHex),
      signature: hex(q.rawSigHex),
      pcrs: new Map(Object.entries(q.pcrs).map(([i, v]) => [Number(i), hex(v)])),
    };
  },
  banks: raw.quotes.map((q) => q.hashAlg),
};
