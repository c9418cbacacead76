/**
 * Reads the small files of the measurements' supply chain (measurements, signatures, version indexes) from an https
 * or file URL, or a local path. Plain http is refused: the signature makes a file's content trustworthy, but an
 * index read over http could silently withhold newer images. Reads are bounded in size and time (an idle timeout
 * and a total deadline, so a server sending a byte now and then cannot hold the CLI), and https follows at most a
 * few redirects, never to plain http. A file URL names a file of this machine (no host but "localhost"). Tests serve files from a local HTTPS server with their own CA (`ca`)
 * or from file URLs; the CLI trusts the system's CAs and NODE_EXTRA_CA_CERTS.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { UserError } from '../errors.js';

export interface ReadUrlOptions {
  /** Extra CA certificates (PEM) to trust for https (tests); default: the system's and NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer;
  /** Largest accepted size; default 1 MiB (a measurements file is about 1 KiB). */
  maxBytes?: number;
  timeoutMs?: number;
  /** Longest time a whole https read (redirects included) may take; default 60 s. */
  deadlineMs?: number;
  /** Directory that relative paths are resolved against; default the current directory. */
  cwd?: string;
}

const DEFAULT_MAX_BYTES = 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_DEADLINE_MS = 60_000;
const MAX_REDIRECTS = 5;

/** A URL for `input`: https:// or file:// URLs as given, anything without a scheme as a path (relative to cwd). */
export function toUrl(input: string, cwd = process.cwd()): URL {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(input)) {
    let url: URL;
    try {
      url = new URL(input);
    } catch (err) {
      throw new UserError(`${input} is not a valid URL.`, { cause: err });
    }
    if (url.protocol !== 'https:' && url.protocol !== 'file:') {
      throw new UserError(`${input}: only https and file URLs (or paths) are read, not ${url.protocol.slice(0, -1)}.`, {
        hint: 'Serve the files over https, or download them and give their paths.',
      });
    }
    if (url.protocol === 'file:') filePath(url);
    return url;
  }
  return pathToFileURL(path.resolve(cwd, input));
}

/**
 * The path of a file URL; a UserError for one that names another host (file://host/x) or cannot be a path here
 * (an encoded "/"), instead of Node's TypeError.
 */
export function filePath(url: URL): string {
  if (url.hostname !== '' && url.hostname !== 'localhost') {
    throw new UserError(`${url.href}: a file URL names a file on this machine, not on "${url.hostname}".`, {
      hint: 'Write file:///absolute/path (three slashes), give the path itself, or fetch the file over https.',
    });
  }
  try {
    return fileURLToPath(url);
  } catch (err) {
    throw new UserError(`${url.href} is not a file path of this machine: ${(err as Error).message}.`, { cause: err });
  }
}

/** How messages name a URL: a file URL as its path (when it is one). */
export function displayUrl(url: URL): string {
  if (url.protocol !== 'file:') return url.href;
  try {
    return filePath(url);
  } catch {
    return url.href;
  }
}

/** The bytes at `url` (https or file). Throws a UserError that names the URL when it cannot be read. */
export async function readUrl(url: URL, options: ReadUrlOptions = {}): Promise<Buffer> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  if (url.protocol === 'file:') {
    const file = filePath(url);
    let stat;
    try {
      stat = await fs.stat(file);
    } catch (err) {
      throw new UserError(
        `Cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}.`,
        { cause: err },
      );
    }
    if (!stat.isFile()) throw new UserError(`${file} is not a file.`);
    if (stat.size > maxBytes)
      throw new UserError(
        `${file} is larger than ${maxBytes} bytes; this is not a measurements, signature or index file.`,
      );
    return fs.readFile(file);
  }
  if (url.protocol !== 'https:') throw new UserError(`${url.href}: only https and file URLs are read.`);
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  return readHttps(
    url,
    { ...options, maxBytes, deadline: { at: Date.now() + deadlineMs, ms: deadlineMs } },
    MAX_REDIRECTS,
  );
}

async function readHttps(
  url: URL,
  options: ReadUrlOptions & { maxBytes: number; deadline: { at: number; ms: number } },
  redirectsLeft: number,
): Promise<Buffer> {
  const https = await import('node:https');
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const failed = (why: string, cause?: unknown) =>
    new UserError(`Cannot fetch ${url.href}: ${why}.`, {
      hint: 'Check the URL and your network; or download the file and give its path.',
      cause,
    });
  return new Promise<Buffer>((resolve, reject) => {
    const request = https.get(url, { ...(options.ca ? { ca: options.ca } : {}), timeout: timeoutMs }, (response) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400 && response.headers.location) {
        response.resume();
        if (redirectsLeft === 0) return reject(failed('too many redirects'));
        let next: URL;
        try {
          next = new URL(response.headers.location, url);
        } catch (err) {
          return reject(failed('a redirect to an invalid URL', err));
        }
        if (next.protocol !== 'https:')
          return reject(failed(`a redirect to ${next.protocol} (only https is followed)`));
        return resolve(readHttps(next, options, redirectsLeft - 1));
      }
      if (status !== 200) {
        response.resume();
        return reject(failed(`HTTP ${status}`));
      }
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > options.maxBytes) {
          request.destroy();
          reject(failed(`larger than ${options.maxBytes} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => resolve(Buffer.concat(chunks)));
      response.on('error', (err) => reject(failed(err.message, err)));
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', (err) => reject(failed(err.message, err)));
    // However the bytes trickle in, the whole read ends by the deadline.
    const deadline = setTimeout(
      () => {
        request.destroy();
        reject(failed(`not read within ${options.deadline.ms} ms`));
      },
      Math.max(0, options.deadline.at - Date.now()),
    );
    request.on('close', () => clearTimeout(deadline));
  });
}
