/**
 * The HTTP side of AMD's key distribution service (KDS) for verifiers that run online (the CLI, join services):
 * a Fetcher (./kds.ts) that GETs from the KDS and keeps every certificate it got in an on-disk cache, so a VCEK
 * (by chip id and reported TCB) or a product's ASK/ARK chain is fetched once per machine, not once per run.
 * Only what parses as the expected certificate is cached (a VCEK/VLEK: one DER certificate; a cert_chain: PEM
 * certificates), an answer larger than 64 KiB is refused before it is read whole, and an entry is used for at most
 * 30 days (the KDS answers a URL with the same certificate for years; the bound keeps a stale or planted file from
 * living forever). Unreachable KDS, no cache entry: a UserError that says the verifier is offline and how to get
 * past it.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../errors.js';
import { KDS_BASE_URL, type Fetcher } from './kds.js';

export interface KdsFetcherOptions {
  /** Where the KDS is (default https://kdsintf.amd.com); URLs made for KDS_BASE_URL are sent here. */
  baseUrl?: string;
  /** Cache folder; default ~/.cache/constellation/kds (XDG_CACHE_HOME honoured). `false`: no disk cache. */
  cacheDir?: string | false;
  /** HTTP GET (default: global fetch). */
  fetch?: typeof globalThis.fetch;
  timeoutMs?: number;
  /** Longest age of a cache entry; default 30 days. */
  maxAgeMs?: number;
  /** Now; default the system clock. */
  now?: () => number;
}

/** Largest KDS answer accepted (a VCEK is about 1.4 KiB, a cert_chain about 4 KiB). */
export const KDS_MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_MAX_AGE_MS = 30 * 24 * 60 * 60 * 1000;

/** Whether `body` is what `url` asks the KDS for: PEM certificates for a cert_chain, else one DER certificate. */
function isExpectedCertificate(url: string, body: Uint8Array): boolean {
  try {
    if (new URL(url).pathname.endsWith('/cert_chain')) {
      const pems =
        Buffer.from(body)
          .toString('utf8')
          .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
      for (const pem of pems) new X509Certificate(pem); // throws for one that does not parse
      return pems.length > 0;
    }
    return body[0] === 0x30 && new X509Certificate(Buffer.from(body)).raw.length === body.length;
  } catch {
    return false;
  }
}

/** The response body, refused once it is larger than `max` (without reading the rest). */
async function boundedBody(response: Response, max: number): Promise<Uint8Array | undefined> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > max) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

export function defaultKdsCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'constellation', 'kds');
}

export class KdsUnavailableError extends UserError {}

/** A Fetcher for the KDS with a disk cache. */
export function kdsFetcher(options: KdsFetcherOptions = {}): Fetcher {
  const base = (options.baseUrl ?? KDS_BASE_URL).replace(/\/$/, '');
  const cacheDir = options.cacheDir === undefined ? defaultKdsCacheDir() : options.cacheDir;
  const get = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
  const now = options.now ?? Date.now;
  return async (url: string) => {
    const target = url.startsWith(KDS_BASE_URL) ? `${base}${url.slice(KDS_BASE_URL.length)}` : url;
    const cacheFile = cacheDir ? path.join(cacheDir, createHash('sha256').update(url).digest('hex')) : undefined;
    if (cacheFile) {
      const stat = await fs.stat(cacheFile).catch(() => undefined);
      const fresh = stat?.isFile() && stat.size <= KDS_MAX_BODY_BYTES && now() - stat.mtimeMs <= maxAgeMs;
      const cached = fresh ? await fs.readFile(cacheFile).catch(() => undefined) : undefined;
      if (cached && isExpectedCertificate(url, cached)) return new Uint8Array(cached);
      // Expired, too large or not a certificate (e.g. written by an earlier version): asked for again.
      if (stat) await fs.rm(cacheFile, { force: true });
    }
    let response: Response;
    try {
      response = await get(target, { signal: AbortSignal.timeout(timeoutMs) });
    } catch (cause) {
      const reason = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).message;
      throw new KdsUnavailableError(
        `Cannot reach AMD's key distribution service (${new URL(target).origin}): ${reason}. This verifier looks offline.`,
        {
          hint: `Verify where ${new URL(target).host} is reachable once (its certificates are then cached in ${cacheDir || 'memory only'}), or include the VCEK in the evidence.`,
          cause,
        },
      );
    }
    if (!response.ok) {
      throw new KdsUnavailableError(
        `AMD's key distribution service answered ${response.status} ${response.statusText} for ${new URL(target).pathname}.`,
        {
          hint:
            response.status === 429
              ? 'The KDS limits requests; try again in a minute.'
              : "Check the report's chip id and TCB, or include the VCEK in the evidence.",
        },
      );
    }
    const body = await boundedBody(response, KDS_MAX_BODY_BYTES);
    if (body === undefined) {
      throw new KdsUnavailableError(
        `AMD's key distribution service answered more than ${KDS_MAX_BODY_BYTES} bytes for ${new URL(target).pathname}; that is no certificate.`,
        {
          hint: 'Check the KDS address (a proxy in between?), or include the VCEK in the evidence.',
        },
      );
    }
    if (!isExpectedCertificate(url, body)) {
      throw new KdsUnavailableError(
        `AMD's key distribution service answered ${new URL(target).pathname} with something that is not ${url.endsWith('/cert_chain') ? 'a PEM certificate chain' : 'a DER certificate'}; nothing was cached.`,
        {
          hint: 'Check the KDS address (a proxy in between?), or include the VCEK in the evidence.',
        },
      );
    }
    if (cacheFile) {
      await fs.mkdir(path.dirname(cacheFile), { recursive: true, mode: 0o700 });
      const temp = `${cacheFile}.${process.pid}.tmp`;
      await fs.writeFile(temp, body, { mode: 0o600 });
      await fs.rename(temp, cacheFile);
    }
    return body;
  };
}
