/**
 * Errors of the AWS provider: what the user sees when AWS refuses a request, when no credentials are found,
 * and when `create` stopped half-way (CreateFailedError: the CLI offers to roll back with terminate).
 * Also the classification of AWS error codes the provider reacts to (not found, duplicate, dependency).
 */
import { UserError } from '../../lib/errors.js';

/** The error code AWS sent (`Code` on the wire), or the SDK's error name; also of an AwsApiError made from it. */
export function awsErrorCode(err: unknown): string {
  if (err instanceof AwsApiError) return err.code;
  const e = err as { Code?: unknown; name?: unknown } | undefined;
  if (typeof e?.Code === 'string') return e.Code;
  return typeof e?.name === 'string' ? e.name : 'Error';
}

export function awsErrorMessage(err: unknown): string {
  const code = awsErrorCode(err);
  const message = err instanceof Error ? err.message : String(err);
  return message && message !== code ? `${code}: ${message}` : code;
}

/** The resource (or attachment) named in a delete or describe call does not exist (any more). */
export function isNotFound(err: unknown): boolean {
  const code = awsErrorCode(err);
  if (/NotFound/.test(code) || code === 'NoSuchEntity' || code === 'Gateway.NotAttached') return true;
  // Auto Scaling reports a missing group as a ValidationError.
  return code === 'ValidationError' && /not found/i.test(err instanceof Error ? err.message : '');
}

/**
 * A resource named in a request is not known yet, where EC2 is eventually consistent (a create moments ago):
 * `Invalid…ID.NotFound`, `InvalidGroup.NotFound`, `InvalidLaunchTemplateId.NotFound`, NAT gateways, and Auto
 * Scaling's ValidationError for a launch template or subnet that "does not exist".
 */
export function isEventuallyConsistent(err: unknown): boolean {
  const code = awsErrorCode(err);
  if (/^Invalid[A-Za-z]*\.NotFound$|^InvalidLaunchTemplateId\.NotFound$|^NatGatewayNotFound$/.test(code)) return true;
  return (
    code === 'ValidationError' &&
    /(launch template|subnet ID).*does not exist/i.test(
      err instanceof Error ? err.message : String((err as { message?: unknown })?.message ?? ''),
    )
  );
}

export function isDuplicate(err: unknown): boolean {
  const code = awsErrorCode(err);
  return /Duplicate|AlreadyExists/.test(code);
}

/** Something still uses the resource (an ENI of a deleted load balancer lingers for a while). */
export function isDependencyViolation(err: unknown): boolean {
  const code = awsErrorCode(err);
  return code === 'DependencyViolation' || code === 'DeleteConflict' || code === 'ResourceInUse';
}

const INVALID_CREDENTIAL_CODES = new Set([
  'AuthFailure',
  'InvalidClientTokenId',
  'UnrecognizedClientException',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'ExpiredTokenException',
  'RequestExpired',
]);

const CREDENTIALS_HINT =
  'Set AWS_PROFILE to a profile in ~/.aws/config or ~/.aws/credentials (e.g. after `aws configure` or `aws sso login`), ' +
  'or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), ' +
  'or run on an EC2 instance with an instance role.';

/** No credentials in the AWS default provider chain, or AWS rejected the ones found. */
export class AwsCredentialsError extends UserError {
  constructor(message: string, cause?: unknown) {
    super(message, { hint: CREDENTIALS_HINT, cause });
  }
}

/** AWS refused a request: the message carries AWS's code and message, and what we were doing. */
export class AwsApiError extends UserError {
  readonly code: string;
  constructor(action: string, cause: unknown, hint?: string) {
    super(`${action} failed: ${awsErrorMessage(cause)}`, { hint, cause });
    this.code = awsErrorCode(cause);
  }
}

/** Turns any error from an SDK call into a UserError that says what we were doing; keeps UserErrors. */
export function toUserError(action: string, err: unknown): UserError {
  if (err instanceof UserError) return err;
  const code = awsErrorCode(err);
  if (code === 'CredentialsProviderError') {
    return new AwsCredentialsError('No AWS credentials found in the default credential chain.', err);
  }
  if (INVALID_CREDENTIAL_CODES.has(code)) {
    return new AwsCredentialsError(`AWS rejected the credentials (${action}): ${awsErrorMessage(err)}`, err);
  }
  if (code === 'UnauthorizedOperation' || code === 'AccessDenied' || code === 'AccessDeniedException') {
    return new AwsApiError(
      action,
      err,
      'The AWS identity in use lacks a permission: see docs/workflows/aws.md for the permissions `create` needs.',
    );
  }
  return new AwsApiError(action, err);
}

/**
 * `create` stopped before the infrastructure was complete. Everything AWS accepted is in the resource journal:
 * running `create` again continues, `terminate` (the roll back) deletes it.
 */
export class CreateFailedError extends UserError {
  readonly canRollBack = true;
  constructor(
    cause: UserError,
    readonly otherFailures: string[] = [],
  ) {
    const others =
      otherFailures.length > 0 ? ` (${otherFailures.length} more step(s) failed too: ${otherFailures.join('; ')})` : '';
    super(`Creating the AWS infrastructure failed: ${cause.message}${others}`, {
      hint: `${cause.hint ? `${cause.hint} ` : ''}What was already made is recorded in the workspace: run \`constellation create\` again to continue, or \`constellation terminate\` to delete it.`,
      cause,
    });
  }
}
