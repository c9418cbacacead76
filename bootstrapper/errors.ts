/**
 * How the bootstrapper words an error for its log, its status and its peers. A UserError's message is meant
 * to be shown; any other error is a bug or an environment problem and is reported as an internal error with
 * its message (the bootstrapper's own errors never carry a secret). Errors are recognised by shape as well as
 * by class, because a module loaded twice (dynamic imports under a test loader) has two UserError classes.
 */
import { UserError } from '../lib/errors.js';

export function isUserFacing(err: unknown): err is UserError {
  return err instanceof UserError || (err instanceof Error && 'exitCode' in err && 'hint' in err);
}

export function describeError(err: unknown): string {
  if (isUserFacing(err)) return err.message;
  return `internal error: ${err instanceof Error ? err.message : String(err)}`;
}

/** The join service's message when it refused this node (lib/atls PeerFailureError), else undefined. */
export function peerRefusal(err: unknown): string | undefined {
  if (err instanceof Error && 'peerMessage' in err && typeof err.peerMessage === 'string') return err.peerMessage;
  return undefined;
}
