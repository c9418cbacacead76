/**
 * The wire adapters of the services that carry secrets (init, join/rejoin, recover), one per direction,
 * and the request fields each binds into userData. The generated messages are oneofs (`kind: {$case,
 * value}`); an adapter only renames cases, so it needs no generated code at run time.
 */
import type { InitRequest, InitResponse } from '../../proto/gen/constellation/init.js';
import type { JoinHello, JoinRequest, JoinResponse } from '../../proto/gen/constellation/join.js';
import type { RecoverRequest, RecoverResponse } from '../../proto/gen/constellation/recover.js';
import { UserError } from '../errors.js';
import type { AtlsMessage, WireAdapter } from './channel.js';

type Kind = AtlsMessage['kind'];
type OneofMessage = { kind: { $case: string; value: unknown } | undefined };

/** An adapter that maps aTLS kinds to oneof case names: `sends` for outgoing messages, `receives` for incoming. */
function oneofAdapter<Out extends OneofMessage, In extends OneofMessage>(
  sends: Partial<Record<Kind, Exclude<Out['kind'], undefined>['$case']>>,
  receives: Partial<Record<Exclude<In['kind'], undefined>['$case'], Kind>>,
): WireAdapter<Out, In> {
  return {
    wrap(message) {
      const $case = sends[message.kind];
      return $case === undefined ? undefined : ({ kind: { $case, value: message.value } } as Out);
    },
    unwrap(message) {
      if (message.kind === undefined) return undefined;
      const kind = (receives as Record<string, Kind | undefined>)[message.kind.$case];
      return kind === undefined ? undefined : ({ kind, value: message.kind.value } as AtlsMessage);
    },
  };
}

/** CLI (verifier) side of Init. */
export const initClientAdapter = oneofAdapter<InitRequest, InitResponse>(
  { challenge: 'challenge', sealed: 'sealedSecrets' },
  { evidence: 'evidence', progress: 'progress', sealedResult: 'sealed', failure: 'failure' },
);
/** Bootstrapper (attested) side of Init. */
export const initServerAdapter = oneofAdapter<InitResponse, InitRequest>(
  { evidence: 'evidence', progress: 'progress', sealed: 'sealedResult', failure: 'failure' },
  { challenge: 'challenge', sealedSecrets: 'sealed' },
);

/** CLI (verifier) side of Recover; RecoverDone arrives as an 'other' message. */
export const recoverClientAdapter = oneofAdapter<RecoverRequest, RecoverResponse>(
  { challenge: 'challenge', sealed: 'sealedSecrets' },
  { evidence: 'evidence', failure: 'failure' },
);
/** Recovery server (attested) side of Recover; send RecoverDone with sendOther. */
export const recoverServerAdapter = oneofAdapter<RecoverResponse, RecoverRequest>(
  { evidence: 'evidence', failure: 'failure' },
  { challenge: 'challenge', sealedSecrets: 'sealed' },
);

/** Joining node (attested) side of IssueJoinTicket / IssueRejoinTicket; send the JoinHello with sendOther. */
export const joinClientAdapter = oneofAdapter<JoinRequest, JoinResponse>(
  { evidence: 'evidence' },
  { challenge: 'challenge', sealedTicket: 'sealed', failure: 'failure' },
);
/** Join service (verifier) side; the JoinHello arrives as an 'other' message. */
export const joinServerAdapter = oneofAdapter<JoinResponse, JoinRequest>(
  { challenge: 'challenge', sealed: 'sealedTicket', failure: 'failure' },
  { evidence: 'evidence' },
);

/**
 * The JoinHello fields a joining node binds into userData, in this order (both sides must use this). The SSH host
 * key only when the hello carries one: a hello without it (a rejoin, a node of an older build) binds the same
 * fields as before, so such nodes and join services of either build still agree.
 */
export function joinHelloBoundFields(hello: JoinHello): Array<Uint8Array | string> {
  const fields = [hello.diskUuid, hello.certificateRequest, hello.isControlPlane ? '1' : '0', hello.nodeName];
  return hello.hostPublicKey.length > 0 ? [...fields, hello.hostPublicKey] : fields;
}

/**
 * Decodes a protobuf message a peer sent (or sealed). The generated decoders throw plain Errors and RangeErrors
 * on malformed bytes; here that is a UserError naming the message, like every other refusal of peer input.
 */
export function decodeMessage<T>(codec: { decode(bytes: Uint8Array): T }, bytes: Uint8Array, what: string): T {
  try {
    return codec.decode(bytes);
  } catch {
    throw new UserError(`${what} is not a valid protobuf message.`);
  }
}
