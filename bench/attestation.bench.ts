/**
 * vTPM attestation throughput: quotes per second from one swtpm through our client (24 SHA-256 PCRs, ECDSA
 * P-256 AK), whole documents issued per second (quote plus PCR read-back), and validations per second on one
 * core (local-vtpm: AK lookup, ECDSA verify, qualifying data, PCR digest, 6 measurements), against the 500/s
 * target; plus the GCE RSA-2048 quote verification for comparison.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TESTDATA } from '../test/support/testdata.js';
import { createValidator, localInstanceInfo, verifyTpmQuote, VtpmIssuer } from '../lib/attestation/index.js';
import { TPM_ALG } from '../lib/tpm/constants.js';
import { TpmClient } from '../lib/tpm/client.js';
import { startSwtpm } from '../lib/tpm/swtpm.js';

const VALIDATION_TARGET = 500;

/** Operations per second of `fn`, run for about `ms` milliseconds after a short warm-up. */
async function rate(fn: () => Promise<unknown> | unknown, ms = 1500): Promise<number> {
  for (let i = 0; i < 10; i++) await fn();
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    await fn();
    n++;
  }
  return (n * 1000) / (performance.now() - start);
}

export default async function (out: (line: string) => void): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-attestation-'));
  const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
  const client = await TpmClient.connect(swtpm.serverSocket);
  try {
    const all = [...Array(24).keys()];
    const ak = await client.attestationKey();
    const quotes = await rate(() => client.quote(ak.handle, randomBytes(32), TPM_ALG.SHA256, all));
    out(`quotes from one swtpm (24 SHA-256 PCRs):   ${quotes.toFixed(0)}/s`);

    const issuer = new VtpmIssuer({ variant: 'local-vtpm', tpm: client, instanceInfo: localInstanceInfo('node-1') });
    const issued = await rate(() => issuer.issue(randomBytes(32), randomBytes(32)));
    out(`documents issued (quote + PCR read-back):  ${issued.toFixed(0)}/s`);

    const pcrs = await client.pcrRead(TPM_ALG.SHA256, [4, 8, 9, 11, 12, 13]);
    const measurements = Object.fromEntries(
      [...pcrs].map(([i, v]) => [String(i), { expected: Buffer.from(v).toString('hex'), warnOnly: false }]),
    );
    const validator = await createValidator(
      'local-vtpm',
      { measurements },
      { akRegistry: { lookup: async () => ({ akPublic: ak.publicArea }) } },
    );
    const nonce = randomBytes(32);
    const doc = await issuer.issue(randomBytes(32), nonce);
    const validations = await rate(() => validator.validate(doc, nonce));
    out(
      `validations, one core (local-vtpm):        ${validations.toFixed(0)}/s  (${(validations / VALIDATION_TARGET).toFixed(1)}x the ${VALIDATION_TARGET}/s target)`,
    );

    const gce = JSON.parse(
      readFileSync(path.join(TESTDATA, 'attestation/gce-vtpm/gce-cos-85-no-nonce.json'), 'utf8'),
    ) as {
      akPubHex: string;
      quotes: { hashAlg: number; quoteHex: string; rawSigHex: string; pcrs: Record<string, string> }[];
    };
    const q = gce.quotes.find((x) => x.hashAlg === TPM_ALG.SHA256)!;
    const hex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
    const evidence = {
      akPublic: hex(gce.akPubHex),
      quote: hex(q.quoteHex),
      signature: hex(q.rawSigHex),
      pcrs: new Map(Object.entries(q.pcrs).map(([i, v]) => [Number(i), hex(v)])),
      hashAlg: q.hashAlg,
      qualifyingData: new Uint8Array(0),
    };
    const gceRate = await rate(() => verifyTpmQuote(evidence));
    out(
      `verifyTpmQuote, GCE RSA-2048 quote:        ${gceRate.toFixed(0)}/s  (${(gceRate / VALIDATION_TARGET).toFixed(1)}x the ${VALIDATION_TARGET}/s target)`,
    );
  } finally {
    client.close();
    await swtpm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
