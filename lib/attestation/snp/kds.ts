/**
 * AMD's key distribution service (KDS): where a VCEK missing from the evidence is fetched, by product, chip id
 * and reported TCB. The HTTP GET is injected (ValidatorDeps.fetch), so tests never reach AMD; answers are
 * cached in memory per fetcher (a VCEK for a given chip and TCB never changes), and concurrent requests for
 * the same certificate share one fetch. VLEKs cannot be fetched anonymously: the evidence must carry them. The
 * fetcher with an on-disk cache and an offline error is ./kds-fetcher.ts.
 */
import { AttestationError } from '../types.js';
import type { SnpProduct, TcbVersion } from './report.js';

export const KDS_BASE_URL = 'https://kdsintf.amd.com';

export type Fetcher = (url: string) => Promise<Uint8Array>;

/** The KDS URL of the VCEK for a chip at a TCB. Turin's hardware id is the first 8 bytes of CHIP_ID and its TCB has an FMC level. */
export function kdsVcekUrl(product: SnpProduct, chipId: Uint8Array, tcb: TcbVersion): string {
  const hwId = Buffer.from(product === 'Turin' ? chipId.subarray(0, 8) : chipId).toString('hex');
  const params = new URLSearchParams();
  if (product === 'Turin') params.set('fmcSPL', String(tcb.fmc ?? 0));
  params.set('blSPL', String(tcb.bootloader));
  params.set('teeSPL', String(tcb.tee));
  params.set('snpSPL', String(tcb.snp));
  params.set('ucodeSPL', String(tcb.microcode));
  return `${KDS_BASE_URL}/vcek/v1/${product}/${hwId}?${params.toString()}`;
}

/** The KDS URL of a product's ASK (VCEK chain) or ASVK (VLEK chain) followed by its ARK, PEM. */
export function kdsCertChainUrl(product: SnpProduct, kind: 'vcek' | 'vlek' = 'vcek'): string {
  return `${KDS_BASE_URL}/${kind}/v1/${product}/cert_chain`;
}

export class KdsClient {
  private readonly cache = new Map<string, Promise<Uint8Array>>();

  constructor(
    private readonly fetch: Fetcher,
    private readonly maxEntries = 1024,
  ) {}

  /** The DER VCEK for the chip and TCB, from the cache or the KDS. */
  vcek(product: SnpProduct, chipId: Uint8Array, tcb: TcbVersion): Promise<Uint8Array> {
    if (chipId.every((b) => b === 0)) {
      return Promise.reject(
        new AttestationError(
          'the SEV-SNP report masks its chip id, so its VCEK cannot be fetched; include the VCEK in the evidence',
        ),
      );
    }
    return this.cached(kdsVcekUrl(product, chipId, tcb), 'the VCEK');
  }

  /** A product's ASK/ASVK and ARK (PEM), from the cache or the KDS. Trust still rests on the shipped ARK. */
  async certChain(product: SnpProduct, kind: 'vcek' | 'vlek' = 'vcek'): Promise<string> {
    return Buffer.from(await this.cached(kdsCertChainUrl(product, kind), `the ${product} certificate chain`)).toString(
      'utf8',
    );
  }

  /** One fetch per URL (concurrent callers share it); a failed fetch is forgotten so a later call tries again. */
  private cached(url: string, what: string): Promise<Uint8Array> {
    let pending = this.cache.get(url);
    if (!pending) {
      pending = this.fetch(url).catch((cause: unknown) => {
        this.cache.delete(url);
        throw new AttestationError(
          `fetching ${what} from AMD's key distribution service failed: ${(cause as Error)?.message ?? String(cause)}`,
          undefined,
          {
            hint:
              (cause as { hint?: string })?.hint ??
              'Check that the verifier can reach kdsintf.amd.com, or include the VCEK in the evidence.',
            cause,
          },
        );
      });
      if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(url, pending);
    }
    return pending;
  }
}

const clients = new WeakMap<Fetcher, KdsClient>();

/** The shared KdsClient (and so the shared cache) of a fetcher. */
export function kdsClientFor(fetch: Fetcher): KdsClient {
  let client = clients.get(fetch);
  if (!client) {
    client = new KdsClient(fetch);
    clients.set(fetch, client);
  }
  return client;
}
