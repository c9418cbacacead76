/**
 * The join service's gRPC server (docs/design.md#attested-channels, docs/design.md#nodes; port 30090): JoinService.IssueJoinTicket and
 * IssueRejoinTicket on TLS with a self-signed certificate (attestation inside the stream authenticates the
 * node, see lib/atls), each call served by join-handler.ts; beside them the standard gRPC health check
 * (health.ts), SERVING while the cluster store answers.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import {
  JOIN_SERVICE_LIMITS,
  startAttestedServer,
  type AttestedServer,
  type ExchangeLimits,
} from '../lib/atls/index.js';
import { rateLimitedLogger } from '../lib/logging/index.js';
import { JoinServiceService, type JoinRequest, type JoinResponse } from '../proto/gen/constellation/join.js';
import { joinServiceHealth } from './health.js';
import { createJoinHandler, type JoinHandlerOptions } from './join-handler.js';

export type { ValidatorFactory } from './join-handler.js';

export const JOIN_SERVICE_PORT = 30090;

export interface JoinServiceOptions extends JoinHandlerOptions {
  /** Address to listen on; default 0.0.0.0. */
  host?: string;
  /** Default 30090; 0 picks a free port. */
  port?: number;
  /** Bounds of the calls; default JOIN_SERVICE_LIMITS. */
  limits?: ExchangeLimits;
}

/** `close()` stops accepting calls, lets running ones finish (at most 5 s), then stops. */
export type JoinServiceHandle = AttestedServer;

const SHUTDOWN_GRACE_MS = 5_000;

/** Reads the join configuration from the store (a UserError when it has none, or no quorum), then listens. */
export async function startJoinService(options: JoinServiceOptions): Promise<JoinServiceHandle> {
  // Refusals are what anyone can provoke: repeats are collapsed (lib/logging/rate-limit.ts).
  const logger = rateLimitedLogger(options.logger.child({ component: 'joinservice' }));
  const handler = await createJoinHandler({ ...options, logger });
  const host = options.host ?? '0.0.0.0';
  const server = await startAttestedServer({
    what: 'join service',
    service: JoinServiceService,
    implementation: {
      issueJoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) =>
        void handler.serve(call, 'join', call.getPeer()),
      issueRejoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) =>
        void handler.serve(call, 'rejoin', call.getPeer()),
    },
    alsoServes: [joinServiceHealth(options.store, logger)],
    host,
    port: options.port ?? JOIN_SERVICE_PORT,
    shutdownGraceMs: SHUTDOWN_GRACE_MS,
    limits: options.limits ?? JOIN_SERVICE_LIMITS,
    logger,
  });
  logger.info('join service listening', { host, port: server.port, store: options.store.backend });
  return server;
}
