/**
 * How the bootstrapper words an error for its log, its status and its peers. A UserError's message is meant
 * to be shown; any other error is a bug or an environment problem and is reported as an internal error with
 * its message (the bootstrapper's own errors never carry a secret).
 */
import { PeerFailureError } from '../lib/atls/index.js';
import { isUserError } from '../lib/errors.js';

export function describeError(err: unknown): string {
  if (isUserError(err)) return err.message;
  return `internal error: ${err instanceof Error ? err.message : String(err)}`;
}

/** The join service's message when it refused this node, else undefined. */
export function peerRefusal(err: unknown): string | undefined {
  return err instanceof PeerFailureError ? err.peerMessage : undefined;
}
