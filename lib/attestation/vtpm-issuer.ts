/**
 * The node side of vTPM attestation (docs/design.md#attestation): quotes the TPM's PCRs with the attestation key, binding
 * instanceInfo, userData and the verifier's nonce through the qualifying data, and packs the document.
 * The PCR values that go with a quote must match its digest, so a PCR extended in between cannot produce a
 * document whose values and quote disagree (the issuer retries instead). The values last read are tried first:
 * when the signed digest matches them they are, byte for byte, the quoted values, and the exchange saves the
 * PCR reads (three TPM round trips for 24 PCRs); otherwise they are read again after the quote.
 */
import { UserError } from '../errors.js';
import { hashAlgName, PCR_COUNT, TPM_ALG } from '../tpm/constants.js';
import type { TpmClient } from '../tpm/client.js';
import { TpmError } from '../tpm/client.js';
import { parseTpmAttest, parseTpmSignature } from '../tpm/structures.js';
import { bytesEqual, pcrDigest } from './tpm-quote.js';
import type { AttestationDocument, Issuer } from './types.js';
import { encodeVtpmAttestation, qualifyingData, type DecodedQuote } from './vtpm-document.js';

export interface VtpmIssuerOptions {
  variant: string;
  tpm: TpmClient;
  /**
   * Variant-specific instance description bound into every quote (local-vtpm: `{"instance":"<node>"}`), or a
   * function making it from the AK's TPMT_PUBLIC (cloud variants: a TEE report that binds the AK). A function's
   * answer is kept per AK: the evidence binds the key, not the nonce, so it is made once.
   */
  instanceInfo?: Uint8Array | ((akPublic: Uint8Array) => Promise<Uint8Array>);
  /** PCRs to quote. Default all 24. */
  pcrs?: number[];
  /** PCR banks to quote, one quote each. Default SHA-256 only. */
  banks?: number[];
  /** Returns the TCG event log to attach, if the platform has one. */
  eventLog?: () => Promise<Uint8Array | undefined>;
}

const ATTEMPTS = 3;

export class VtpmIssuer implements Issuer {
  readonly variant: string;
  /** Per PCR bank, the values read last (never altered once stored). */
  private readonly lastPcrs = new Map<number, Map<number, Uint8Array>>();
  private madeInfo: { ak: string; info: Promise<Uint8Array> } | undefined;

  constructor(private readonly options: VtpmIssuerOptions) {
    this.variant = options.variant;
  }

  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument> {
    const instanceInfo = await this.instanceInfo();
    const extraData = qualifyingData(instanceInfo, userData, nonce);
    const quotes: DecodedQuote[] = [];
    for (const bank of this.options.banks ?? [TPM_ALG.SHA256]) quotes.push(await this.quoteBank(extraData, bank));
    const ak = await this.options.tpm.attestationKey();
    const eventLog = await this.options.eventLog?.();
    return {
      variant: this.variant,
      attestation: encodeVtpmAttestation({ akPublic: ak.publicArea, quotes, eventLog }),
      instanceInfo: Buffer.from(instanceInfo).toString('base64'),
      userData: Buffer.from(userData).toString('base64'),
    };
  }

  private async instanceInfo(): Promise<Uint8Array> {
    const made = this.options.instanceInfo;
    if (made === undefined) return new Uint8Array(0);
    if (made instanceof Uint8Array) return made;
    const ak = (await this.options.tpm.attestationKey()).publicArea;
    const key = Buffer.from(ak).toString('hex');
    if (this.madeInfo?.ak !== key) {
      const info = made(ak);
      this.madeInfo = { ak: key, info };
      info.catch(() => {
        if (this.madeInfo?.info === info) this.madeInfo = undefined;
      });
    }
    return this.madeInfo.info;
  }

  private async quoteBank(extraData: Uint8Array, hashAlg: number): Promise<DecodedQuote> {
    const indices = this.options.pcrs ?? [...Array(PCR_COUNT).keys()];
    const tpm = this.options.tpm;
    let handle = (await tpm.attestationKey()).handle;
    for (let attempt = 1; ; attempt++) {
      let quoted: { quote: Uint8Array; signature: Uint8Array };
      try {
        quoted = await tpm.quote(handle, extraData, hashAlg, indices);
      } catch (err) {
        if (!(err instanceof TpmError) || attempt > 1) throw err;
        handle = (await tpm.attestationKey({ renew: true })).handle; // e.g. TPM_RC_HANDLE after a reset
        continue;
      }
      const attest = parseTpmAttest(quoted.quote);
      const sigHash = parseTpmSignature(quoted.signature).hashAlg;
      const quotedBy = (pcrs: Map<number, Uint8Array>) => {
        const values = attest.quote.pcrSelect.flatMap((s) => s.pcrs.map((i) => pcrs.get(i)));
        return (
          values.every((v): v is Uint8Array => v !== undefined) &&
          bytesEqual(pcrDigest(sigHash, values), attest.quote.pcrDigest)
        );
      };
      const known = this.lastPcrs.get(hashAlg);
      if (known && quotedBy(known)) return { hashAlg, quote: quoted.quote, signature: quoted.signature, pcrs: known };
      const pcrs = await tpm.pcrRead(hashAlg, indices);
      this.lastPcrs.set(hashAlg, pcrs);
      if (quotedBy(pcrs)) return { hashAlg, quote: quoted.quote, signature: quoted.signature, pcrs };
      if (attempt >= ATTEMPTS)
        throw new UserError(`The TPM's ${hashAlgName(hashAlg)} PCRs kept changing while quoting`, {
          hint: 'Try again once the node has finished booting.',
        });
    }
  }
}
