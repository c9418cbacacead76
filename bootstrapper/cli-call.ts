/**
 * One call of the CLI to a node's attested server (init, recover; docs/design.md#attested-channels): the node attests, receives the
 * secrets the CLI sealed to it, and `work` carries on the conversation. Never throws: a CLI that rejected the
 * node's attestation (it ends the stream and sends nothing) or went away is logged; a failure of `work` is
 * logged and sent to the CLI as a Failure.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { attestedServer, type AttestedSession, type Purpose, type WireAdapter } from '../lib/atls/index.js';
import type { NodeRoleOptions } from './node-role.js';
import { describeError } from './errors.js';

export interface CliCallOptions extends Pick<NodeRoleOptions, 'issuer' | 'logger' | 'stepTimeoutMs'> {
  purpose: Purpose;
  /** Logged with the reason when `work` fails. */
  failureMessage: string;
  /** Sent with the Failure (the tail of the node's log). */
  failureLog?: () => Uint8Array;
}

export async function serveCliCall<Request, Response>(
  call: ServerDuplexStream<Request, Response>,
  adapter: WireAdapter<Response, Request>,
  options: CliCallOptions,
  work: (session: AttestedSession<Response, Request>, peer: string) => Promise<void>,
): Promise<void> {
  const { purpose, issuer, logger } = options;
  const peer = `the CLI at ${call.getPeer()}`;
  let session;
  try {
    session = await attestedServer(call, adapter, { purpose, issuer, peer, timeoutMs: options.stepTimeoutMs });
  } catch (err) {
    logger.warn(`${purpose} request ended before any secret arrived`, { peer, reason: describeError(err) });
    return;
  }
  try {
    await work(session, peer);
  } catch (err) {
    const reason = describeError(err);
    logger.error(options.failureMessage, { peer, reason });
    session.channel.fail(reason, options.failureLog?.());
  }
}
