/**
 * A small client for the EC2 instance metadata service, version 2 (session token first, then GETs with it).
 * Hand-written: the SDK's IMDS code is internal to its credential provider, and @aws-sdk/ec2-metadata-service
 * is not among our dependencies; the protocol is two HTTP requests.
 */

const TOKEN_TTL_SECONDS = 21600;

export class ImdsError extends Error {
  override readonly name = 'ImdsError';
}

export class ImdsClient {
  private token?: { value: string; expiresAt: number };
  private readonly endpoint: string;

  constructor(
    endpoint = process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT || 'http://169.254.169.254',
    private readonly timeoutMs = 5000,
  ) {
    this.endpoint = endpoint.replace(/\/+$/, '');
  }

  /** GET /latest/meta-data/<path>. */
  async metadata(path: string): Promise<string> {
    return this.get(`/latest/meta-data/${path}`);
  }

  /** GET /latest/dynamic/<path> (e.g. instance-identity/document). */
  async dynamic(path: string): Promise<string> {
    return this.get(`/latest/dynamic/${path}`);
  }

  private async get(path: string, retry = true): Promise<string> {
    const res = await this.request(path, { headers: { 'X-aws-ec2-metadata-token': await this.sessionToken() } });
    if (res.status === 401 && retry) {
      this.token = undefined;
      return this.get(path, false);
    }
    if (res.status !== 200) throw new ImdsError(`instance metadata ${path}: HTTP ${res.status}`);
    return res.text();
  }

  private async sessionToken(): Promise<string> {
    if (this.token && this.token.expiresAt > Date.now()) return this.token.value;
    const res = await this.request('/latest/api/token', {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(TOKEN_TTL_SECONDS) },
    });
    if (res.status !== 200) throw new ImdsError(`instance metadata token: HTTP ${res.status}`);
    this.token = { value: await res.text(), expiresAt: Date.now() + (TOKEN_TTL_SECONDS - 60) * 1000 };
    return this.token.value;
  }

  private async request(path: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(`${this.endpoint}${path}`, { ...init, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (err) {
      throw new ImdsError(`instance metadata service at ${this.endpoint} unreachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
}
