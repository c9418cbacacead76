/**
 * The errors the Azure provider shows a user, and the translation of Azure SDK errors into them: a missing
 * credential becomes NoAzureCredentialsError naming what to set; an ARM error keeps Azure's own code and
 * message (quota, conflict, policy) so the user sees what the cloud said; a failed create is a CreateFailedError
 * the CLI can offer to roll back. Tokens never appear in messages: the SDK errors we copy carry none.
 */
import { UserError } from '../../lib/errors.js';

export const CREDENTIALS_HINT =
  'Sign in with `az login` (Azure CLI), or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET ' +
  '(or AZURE_CLIENT_CERTIFICATE_PATH) for a service principal, or run on an Azure VM with a managed identity.';

export class NoAzureCredentialsError extends UserError {
  constructor(cause?: unknown) {
    super(
      'No Azure credentials found: DefaultAzureCredential tried the environment, workload identity, managed identity and the Azure developer tools.',
      {
        hint: CREDENTIALS_HINT,
        cause,
      },
    );
  }
}

/** An error Azure Resource Manager answered with; `code` is Azure's error code, e.g. QuotaExceeded. */
export class AzureApiError extends UserError {
  readonly code?: string;
  readonly statusCode?: number;
  constructor(message: string, options: { code?: string; statusCode?: number; hint?: string; cause?: unknown }) {
    super(message, { hint: options.hint, cause: options.cause });
    this.code = options.code;
    this.statusCode = options.statusCode;
  }
}

/** Thrown by create when some resources may exist; the CLI asks the user and then calls terminate. */
export class CreateFailedError extends UserError {
  readonly canRollBack: boolean;
  readonly code?: string;
  /** `causeHint`: what to fix, from the error that made create fail. */
  constructor(message: string, options: { canRollBack: boolean; code?: string; causeHint?: string; cause?: unknown }) {
    const next = options.canRollBack
      ? 'run `constellation create` again to continue, or roll back with `constellation terminate`.'
      : 'run `constellation create` again.';
    super(message, {
      hint: options.causeHint ? `${options.causeHint} Then ${next}` : `Fix the cause and ${next}`,
      cause: options.cause,
    });
    this.canRollBack = options.canRollBack;
    this.code = options.code;
  }
}

interface SdkErrorShape {
  name?: string;
  message?: string;
  code?: string;
  statusCode?: number;
  details?: { error?: { code?: string; message?: string }; code?: string; message?: string };
  errors?: unknown[];
  cause?: unknown;
}

/** True when the SDK failed because no credential in the chain could get a token. */
export function isCredentialUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = err;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const e = current as SdkErrorShape;
    if (e.name === 'CredentialUnavailableError') return true;
    if (e.name === 'AggregateAuthenticationError') {
      return (e.errors ?? []).every((inner) => (inner as SdkErrorShape)?.name === 'CredentialUnavailableError');
    }
    current = e.cause;
  }
  return false;
}

/** Azure's error code and message of an SDK error (RestError or a failed long-running operation). */
export function azureErrorDetails(err: unknown): { code?: string; message: string; statusCode?: number } {
  const e = (err ?? {}) as SdkErrorShape;
  const detail = e.details?.error ?? e.details;
  const code = detail?.code ?? e.code;
  const message = detail?.message ?? e.message ?? String(err);
  return { code: code && code !== 'undefined' ? code : undefined, message, statusCode: e.statusCode };
}

export function isNotFound(err: unknown): boolean {
  const { code, statusCode } = azureErrorDetails(err);
  return statusCode === 404 || code === 'ResourceNotFound' || code === 'NotFound' || code === 'ResourceGroupNotFound';
}

/** Translates an SDK error into a UserError; `what` says what we were doing ("creating the load balancer"). */
export function toUserError(err: unknown, what: string): UserError {
  if (err instanceof UserError) return err;
  if (isCredentialUnavailable(err)) return new NoAzureCredentialsError(err);
  if ((err as SdkErrorShape)?.name === 'AbortError') return new UserError(`Interrupted while ${what}.`, { cause: err });
  const { code, message, statusCode } = azureErrorDetails(err);
  if ((err as SdkErrorShape)?.name === 'AuthenticationError' || statusCode === 401) {
    return new AzureApiError(`Azure rejected the credentials while ${what}: ${message}`, {
      code,
      statusCode,
      hint: CREDENTIALS_HINT,
      cause: err,
    });
  }
  if (statusCode === 403 || code === 'AuthorizationFailed') {
    return new AzureApiError(`Azure denied access while ${what}: ${message}`, {
      code,
      statusCode,
      hint: 'The signed-in identity needs Owner or Contributor (plus User Access Administrator for `iam create`) on the subscription or resource group.',
      cause: err,
    });
  }
  return new AzureApiError(`Azure failed while ${what}: ${code ? `${code}: ` : ''}${message}`, {
    code,
    statusCode,
    cause: err,
  });
}
