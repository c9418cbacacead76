/**
 * The join service's gRPC server (DESIGN §6, §7; port 30090): JoinService.IssueJoinTicket and
 * IssueRejoinTicket on TLS with a self-signed certificate (attestation inside the stream authenticates the
 * node, see lib/atls), each call served by join-handler.ts.
 *
 * Everything below this module is imported on start, in one dynamic import graph: grpc-js stays out of
 * processes that never serve joins, and the handler, lib/atls and the validators it loads share one copy of
 * each module (so their error classes are the same classes; a loader that kept static and dynamic imports
 * apart, as tsx under mocha does, would otherwise turn a refusal's reason into "internal error").
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { JoinRequest, JoinResponse } from '../proto/gen/constellation/join.js';
import type { JoinHandlerOptions } from './join-handler.js';

export type { ValidatorFactory } from './join-handler.js';

export const JOIN_SERVICE_PORT = 30090;

export interface JoinServiceOptions extends JoinHandlerOptions {
  /** Address to listen on; default 0.0.0.0. */
  host?: string;
  /** Default 30090; 0 picks a free port. */
  port?: number;
}

export interface JoinServiceHandle {
  port: number;
  /** Stops accepting calls, lets running ones finish (at most 5 s), then stops. */
  close(): Promise<void>;
}

const SHUTDOWN_GRACE_MS = 5_000;

/** Loads the service files (a UserError when they are incomplete or invalid), then listens. */
export async function startJoinService(options: JoinServiceOptions): Promise<JoinServiceHandle> {
  const [grpc, { JoinServiceService }, { createJoinHandler }, { createAttestedServerCredentials }, { UserError }] = await Promise.all([
    import('@grpc/grpc-js'),
    import('../proto/gen/constellation/join.js'),
    import('./join-handler.js'),
    import('../lib/atls/credentials.js'),
    import('../lib/errors.js'),
  ]);
  const logger = options.logger.child({ component: 'joinservice' });
  const handler = await createJoinHandler({ ...options, logger });

  const server = new grpc.Server();
  server.addService(JoinServiceService, {
    issueJoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) => void handler.serve(call, 'join', call.getPeer()),
    issueRejoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) => void handler.serve(call, 'rejoin', call.getPeer()),
  });
  const host = options.host ?? '0.0.0.0';
  const port = options.port ?? JOIN_SERVICE_PORT;
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const credentials = await createAttestedServerCredentials();
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, credentials, (err, p) =>
      err ? reject(new UserError(`The join service cannot listen on ${address}: ${err.message}`, { cause: err })) : resolve(p),
    ),
  );
  logger.info('join service listening', { host, port: bound, dir: options.filesDir });

  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
