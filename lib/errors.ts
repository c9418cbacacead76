/**
 * Errors meant for the person at the terminal. Every error that bad input, a missing file or a refused
 * attestation can cause is a UserError (or a subclass): its message says what is wrong, its hint what to do.
 * Anything else reaching the CLI's top level is a bug and is reported as one.
 * Never put a secret (master secret, keys, tokens, init secret) in a message or hint.
 */
export class UserError extends Error {
  readonly hint?: string;
  readonly exitCode: number;

  constructor(message: string, options: { hint?: string; exitCode?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
    this.exitCode = options.exitCode ?? 1;
  }
}

export function isUserError(err: unknown): err is UserError {
  return err instanceof UserError;
}
