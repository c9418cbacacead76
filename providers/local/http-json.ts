/**
 * A small JSON-over-HTTP client for the local metadata server. node:http rather than fetch because nodes must send
 * from their own address (the metadata server identifies a node by its source address), which fetch cannot.
 */
import http from 'node:http';

export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpStatusError';
  }
}

export interface JsonRequest {
  method?: 'GET' | 'PUT' | 'DELETE';
  body?: unknown;
  /** Bearer token (the control API). */
  token?: string;
  /** Source address of the connection. */
  localAddress?: string;
  timeoutMs?: number;
}

/** Sends a request and parses the JSON answer; a non-2xx status becomes an HttpStatusError carrying the server's message. */
export function requestJson<T>(url: string, request: JsonRequest = {}): Promise<T> {
  const body = request.body === undefined ? undefined : Buffer.from(JSON.stringify(request.body));
  return new Promise<T>((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: request.method ?? 'GET',
        localAddress: request.localAddress,
        timeout: request.timeoutMs ?? 5000,
        // A fresh connection per request: one node's keep-alive socket must never carry another caller's request.
        agent: false,
        headers: {
          accept: 'application/json',
          ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}),
          ...(request.token ? { authorization: `Bearer ${request.token}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            parsed = undefined;
          }
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            const message = (parsed as { error?: string } | undefined)?.error ?? `HTTP ${status}`;
            reject(new HttpStatusError(status, `${request.method ?? 'GET'} ${url}: ${message}`));
          } else resolve(parsed as T);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${request.method ?? 'GET'} ${url}: no answer in time`)));
    req.on('error', reject);
    req.end(body);
  });
}
