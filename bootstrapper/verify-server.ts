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
import type { NodeStatusTracker } from './node-status.js';

export function createVerifyService(issuer: Issuer, status: NodeStatusTracker): VerifyServer {
  return {
    ...createVerifyHandler(issuer),
    getStatus(_call: ServerUnaryCall<GetStatusRequest, NodeStatus>, callback: sendUnaryData<NodeStatus>) {
      callback(null, NodeStatus.fromPartial(status.get()));
    },
  };
}
