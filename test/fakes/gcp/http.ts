/**
 * The request/response shapes the fake GCP's handlers share, and GCP's JSON error format
 * (`{"error": {"code", "message", "errors": [{"domain", "reason", "message"}], "status"}}`).
 */
export interface FakeRequest {
  method: string;
  /** Decoded path, without the query. */
  path: string;
  query: URLSearchParams;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export interface FakeResponse {
  status: number;
  body: unknown;
  /** Plain text instead of JSON (the metadata server). */
  text?: boolean;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason?: string,
    readonly grpcStatus?: string,
  ) {
    super(message);
  }

  toBody(): unknown {
    return {
      error: {
        code: this.status,
        message: this.message,
        ...(this.reason ? { errors: [{ domain: 'global', reason: this.reason, message: this.message }] } : {}),
        ...(this.grpcStatus ? { status: this.grpcStatus } : {}),
      },
    };
  }
}

export type Handler = (req: FakeRequest) => Promise<FakeResponse | undefined> | FakeResponse | undefined;

export const json = (body: unknown, status = 200): FakeResponse => ({ status, body });
