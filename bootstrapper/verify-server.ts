/**
 * The verify service (port 30081, every node): GetAttestation answers a nonce with an attestation document
 * whose userData binds purpose "verify" and the nonce (lib/atls's handler; PCR 15 shows the cluster the node
 * belongs to), and GetStatus says what the bootstrapper is doing (`constellation status`). Neither carries a
 * secret.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { Issuer } from '../lib/attestation/types.js';
import { createVerifyHandler } from '../lib/atls/index.js';
import { NodeStatus, type GetStatusRequest, type VerifyServer } from '../proto/gen/constellation/verify.js';
import { NODE_STATES, type NodeState, type NodeStatusTracker } from './node-status.js';

/**
 * The longest a GetStatus long poll is held (verify.proto): short, so that a node that stops finds no call of it
 * still open beyond its shutdown grace, and a caller's deadline of a few seconds is never reached.
 */
export const STATUS_WAIT_MAX_MS = 1000;

export function createVerifyService(issuer: Issuer, status: NodeStatusTracker): VerifyServer {
  return {
    ...createVerifyHandler(issuer),
    getStatus(call: ServerUnaryCall<GetStatusRequest, NodeStatus>, callback: sendUnaryData<NodeStatus>) {
      const { knownState, waitMs } = call.request;
      const known = NODE_STATES.includes(knownState as NodeState) ? (knownState as NodeState) : undefined;
      if (!known) return callback(null, NodeStatus.fromPartial(status.get()));
      void status
        .changedFrom(known, Math.min(waitMs, STATUS_WAIT_MAX_MS))
        .then((snapshot) => callback(null, NodeStatus.fromPartial(snapshot)));
    },
  };
}
