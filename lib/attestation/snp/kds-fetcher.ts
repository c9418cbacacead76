/**
 * The HTTP side of AMD's key distribution service (KDS) for verifiers that run online (the CLI, join services):
 * a Fetcher (./kds.ts) that GETs from the KDS and keeps every certificate it got in an on-disk cache, so a VCEK
 * (by chip id and reported TCB) or a product's ASK/ARK chain is fetched once per machine, not once per run. The
 * KDS answers certificates for a URL forever, so cache entries never expire. Unreachable KDS, no cache entry:
 * a UserError that says the verifier is offline and how to get past it.
 */
import { createHash } from 'node:crypto';
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
  return async (url: string) => {
    const target = url.startsWith(KDS_BASE_URL) ? `${base}${url.slice(KDS_BASE_URL.length)}` : url;
    const cacheFile = cacheDir ? path.join(cacheDir, createHash('sha256').update(url).digest('hex')) : undefined;
    if (cacheFile) {
      const cached = await fs.readFile(cacheFile).catch(() => undefined);
      if (cached && cached.length > 0) return new Uint8Array(cached);
    }
    let response: Response;
    try {
      response = await get(target, { signal: AbortSignal.timeout(timeoutMs) });
    } catch (cause) {
      const reason = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).message;
      throw new KdsUnavailableError(`Cannot reach AMD's key distribution service (${new URL(target).origin}): ${reason}. This verifier looks offline.`, {
        hint: `Verify where ${new URL(target).host} is reachable once (its certificates are then cached in ${cacheDir || 'memory only'}), or include the VCEK in the evidence.`,
        cause,
      });
    }
    if (!response.ok) {
      throw new KdsUnavailableError(`AMD's key distribution service answered ${response.status} ${response.statusText} for ${new URL(target).pathname}.`, {
        hint: response.status === 429 ? 'The KDS limits requests; try again in a minute.' : 'Check the report\'s chip id and TCB, or include the VCEK in the evidence.',
      });
    }
    const body = new Uint8Array(await response.arrayBuffer());
    if (cacheFile) {
      await fs.mkdir(path.dirname(cacheFile), { recursive: true, mode: 0o700 });
      const temp = `${cacheFile}.${process.pid}.tmp`;
      await fs.writeFile(temp, body, { mode: 0o600 });
      await fs.rename(temp, cacheFile);
    }
    return body;
  };
}
