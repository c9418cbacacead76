/**
 * Errors of the GCP provider: what the user sees when GCP refuses a request or a long-running operation fails,
 * when no credentials are found, and when `create` stopped half-way (CreateFailedError: the CLI offers to roll
 * back with terminate). Also the classification of GCP errors the provider reacts to (not found, already
 * exists, in use, retryable). Errors arrive in three shapes: GaxiosError (HTTP status, JSON body as message or
 * data) from the REST transport, GoogleError (gRPC code) from gax, and our GcpOperationError for operations.
 */
import { UserError } from '../../lib/errors.js';

export interface GcpErrorInfo {
  /** HTTP status (also for gRPC codes and failed operations, mapped). */
  status?: number;
  /** GCP's reason (`errors[0].reason`, `status`, or an operation error code such as QUOTA_EXCEEDED). */
  reason?: string;
  /** GCP's own message. */
  message: string;
}

/** A compute operation that finished with an error: GCP's codes and messages. */
export class GcpOperationError extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly reason: string | undefined,
  ) {
    super(message);
    this.name = 'GcpOperationError';
  }
}

const GRPC_TO_HTTP: Record<number, number> = {
  3: 400,
  5: 404,
  6: 409,
  7: 403,
  8: 429,
  10: 409,
  13: 500,
  14: 503,
  16: 401,
};

interface ErrorBody {
  error?: { code?: number; message?: string; status?: string; errors?: { reason?: string; message?: string }[] };
}

function parseBody(value: unknown): ErrorBody | undefined {
  if (value && typeof value === 'object') return value as ErrorBody;
  if (typeof value !== 'string' || !value.trimStart().startsWith('{')) return undefined;
  try {
    return JSON.parse(value) as ErrorBody;
  } catch {
    return undefined;
  }
}

export function gcpErrorInfo(err: unknown): GcpErrorInfo {
  if (err instanceof GcpOperationError) return { status: err.status, reason: err.reason, message: err.message };
  const e = (err ?? {}) as {
    name?: string;
    message?: string;
    status?: unknown;
    code?: unknown;
    response?: { status?: number; data?: unknown };
  };
  const message = typeof e.message === 'string' ? e.message : String(err);
  const body = parseBody(e.response?.data) ?? parseBody(message);
  let status = typeof e.status === 'number' ? e.status : e.response?.status;
  if (status === undefined && typeof e.code === 'number') {
    // GoogleError carries a gRPC code; gaxios an HTTP status in `code` too (numbers >= 100).
    status = e.code >= 100 ? e.code : GRPC_TO_HTTP[e.code];
  }
  if (body?.error) {
    return {
      status: status ?? body.error.code,
      reason: body.error.errors?.[0]?.reason ?? body.error.status,
      message: body.error.message ?? message,
    };
  }
  return { status, reason: typeof e.code === 'string' ? e.code : undefined, message };
}

export function isNotFound(err: unknown): boolean {
  const { status, reason } = gcpErrorInfo(err);
  return status === 404 || reason === 'notFound' || reason === 'RESOURCE_NOT_FOUND' || reason === 'NOT_FOUND';
}

export function isAlreadyExists(err: unknown): boolean {
  const { status, reason } = gcpErrorInfo(err);
  if (reason === 'alreadyExists' || reason === 'ALREADY_EXISTS' || reason === 'RESOURCE_ALREADY_EXISTS') return true;
  return status === 409 && reason === undefined;
}

/** GCP refuses to delete a resource another one still uses (or one not ready yet): try again later. */
export function isInUse(err: unknown): boolean {
  const { reason } = gcpErrorInfo(err);
  return (
    reason === 'resourceInUseByAnotherResource' ||
    reason === 'RESOURCE_IN_USE_BY_ANOTHER_RESOURCE' ||
    reason === 'resourceNotReady'
  );
}

/**
 * GCP refuses a change to a network while another change to it runs (400 resourceNotReady): the inserts of a new
 * network's subnetworks, routers and firewalls, sent concurrently, meet it. Trying again after a moment succeeds.
 */
export function isNotReady(err: unknown): boolean {
  return gcpErrorInfo(err).reason === 'resourceNotReady';
}

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);
const RATE_LIMIT_REASONS = new Set(['rateLimitExceeded', 'userRateLimitExceeded', 'RESOURCE_EXHAUSTED', 'UNAVAILABLE']);
const RETRYABLE_NETWORK_CODES = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN']);

/** Throttling (429, 403 rateLimitExceeded), a server error (5xx) or a dropped connection: safe to try again. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof GcpOperationError) return false;
  const { status, reason } = gcpErrorInfo(err);
  if (status !== undefined && RETRYABLE_STATUS.has(status)) return true;
  if (reason !== undefined && RATE_LIMIT_REASONS.has(reason)) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && RETRYABLE_NETWORK_CODES.has(code);
}

const CREDENTIALS_HINT =
  'Set GOOGLE_APPLICATION_CREDENTIALS to the path of a service-account key file, ' +
  'or run `gcloud auth application-default login`, ' +
  'or set provider.gcp.serviceAccountKeyPath in constellation-conf.yaml (`constellation iam create gcp --update-config` makes one).';

/** No Google application default credentials were found, or GCP rejected the ones found. */
export class GcpCredentialsError extends UserError {
  constructor(message: string, cause?: unknown) {
    super(message, { hint: CREDENTIALS_HINT, cause });
  }
}

function credentialsProblem(err: unknown, info: GcpErrorInfo): GcpCredentialsError | undefined {
  const message = info.message;
  if (/Could not load the default credentials/i.test(message)) {
    return new GcpCredentialsError('No Google application default credentials were found.', err);
  }
  const envFile = process.env.GOOGLE_APPLICATION_CREDENTIALS;
  if (/GOOGLE_APPLICATION_CREDENTIALS/.test(message) || (envFile && message.includes(envFile))) {
    return new GcpCredentialsError(
      `The credentials file named by GOOGLE_APPLICATION_CREDENTIALS cannot be used: ${firstLine(message)}`,
      err,
    );
  }
  if (/invalid_grant|invalid_client|unauthorized_client/.test(message) || info.status === 401) {
    return new GcpCredentialsError(`GCP rejected the credentials: ${firstLine(message)}`, err);
  }
  return undefined;
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}

/** GCP refused a request: the message carries GCP's message and what we were doing. */
export class GcpApiError extends UserError {
  readonly status?: number;
  readonly reason?: string;
  constructor(action: string, cause: unknown, hint?: string) {
    const info = gcpErrorInfo(cause);
    super(`${action} failed: ${firstLine(info.message)}${info.reason ? ` (${info.reason})` : ''}`, { hint, cause });
    this.status = info.status;
    this.reason = info.reason;
  }
}

/** Turns any error from an API call into a UserError that says what we were doing; keeps UserErrors. */
export function toUserError(action: string, err: unknown): UserError {
  if (err instanceof UserError) return err;
  const info = gcpErrorInfo(err);
  const credentials = credentialsProblem(err, info);
  if (credentials) return credentials;
  if (info.status === 403 && !isRetryable(err)) {
    return new GcpApiError(
      action,
      err,
      'The credentials lack a permission for this call; `constellation iam create gcp` makes a service account with the roles needed.',
    );
  }
  if (info.reason === 'QUOTA_EXCEEDED') {
    return new GcpApiError(
      action,
      err,
      'Request a higher quota in the Google Cloud console (IAM & Admin > Quotas), or use fewer or smaller nodes.',
    );
  }
  return new GcpApiError(action, err);
}

/**
 * `create` stopped before the infrastructure was complete. Everything made so far is in the resource journal:
 * running create again continues, terminate (the roll back the CLI offers when canRollBack) deletes it.
 */
export class CreateFailedError extends UserError {
  readonly canRollBack = true;
  /** The step that failed (e.g. "igm-worker_default"). */
  readonly step?: string;
  constructor(message: string, options: { step?: string; cause?: unknown; hint?: string } = {}) {
    const next =
      'Run `constellation create` again to continue where it stopped, or `constellation terminate` to delete what was made.';
    super(message, { hint: options.hint ? `${options.hint} Then: ${next}` : next, cause: options.cause });
    this.step = options.step;
  }
}
