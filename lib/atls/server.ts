/**
 * A gRPC server that carries attested channels (the node's init, verify and recovery servers, the join
 * service): TLS with a fresh self-signed certificate (credentials.ts; attestation inside the channel
 * authenticates the server, docs/design.md#attested-channels), bound to host:port. Calls are admitted within `limits` (admission.ts)
 * and no message may exceed MAX_MESSAGE_BYTES. Closing lets running calls finish for a grace period, then cuts
 * them off, so a process shuts down promptly on SIGTERM.
 */
import type { ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js';
import { UserError } from '../errors.js';
import { nullLogger, type Logger } from '../logging/index.js';
import { admitCalls, ExchangeAdmission, type ExchangeLimits } from './admission.js';
import { createAttestedServerCredentials } from './credentials.js';
import { MAX_DOCUMENT_BYTES } from './document.js';

/** The largest message an attested server accepts: an attestation document at its limit, plus its envelope. */
export const MAX_MESSAGE_BYTES = MAX_DOCUMENT_BYTES + 64 * 1024;

export interface AttestedServerOptions {
  /** Names the server in errors, e.g. "init server". */
  what: string;
  service: ServiceDefinition;
  implementation: UntypedServiceImplementation;
  /** Further services on the same server and port (the standard health check), admitted alike. */
  alsoServes?: Array<{ service: ServiceDefinition; implementation: UntypedServiceImplementation }>;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** How long close() lets running calls finish. */
  shutdownGraceMs: number;
  /** Concurrency and idle bounds of the calls (admission.ts). */
  limits: ExchangeLimits;
  /** Where refused calls and closed idle streams are logged (warn); give a rate-limited logger. */
  logger?: Logger;
}

export interface AttestedServer {
  /** The bound port (the requested one, or the one the OS picked for 0). */
  port: number;
  /** Stops accepting calls, lets running ones finish (at most the grace period), then stops. Idempotent. */
  close(): Promise<void>;
}

/** The address a gRPC server binds: host:port, IPv6 hosts in brackets. */
export function bindAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export async function startAttestedServer(options: AttestedServerOptions): Promise<AttestedServer> {
  const { Server } = await import('@grpc/grpc-js');
  // No channelz: nothing reads it, and it keeps counters and trace references for every call and connection.
  const server = new Server({ 'grpc.enable_channelz': 0, 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES });
  const admission = new ExchangeAdmission(options.what, options.limits);
  for (const { service, implementation } of [options, ...(options.alsoServes ?? [])]) {
    server.addService(service, admitCalls(service, implementation, admission, options.logger ?? nullLogger));
  }
  const target = bindAddress(options.host, options.port);
  const credentials = await createAttestedServerCredentials();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(target, credentials, (err, bound) =>
      err
        ? reject(
            new UserError(`The ${options.what} cannot listen on ${target}: ${err.message}`, {
              hint: 'Is another process using the port?',
              cause: err,
            }),
          )
        : resolve(bound),
    );
  });
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          destroySessions(server);
          server.forceShutdown();
          resolve();
        }, options.shutdownGraceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      })),
  };
}

/**
 * Cuts off every connection of the server. grpc-js's forceShutdown destroys only the sessions channelz tracks, so
 * with channelz off (above) a call still running would keep its connection, and the process, alive (grpc-js
 * 1.14); the sessions grpc-js keeps per listening socket are there either way.
 */
function destroySessions(server: object): void {
  const listeners = (server as { http2Servers?: Map<unknown, { sessions?: Set<{ destroy(): void }> }> }).http2Servers;
  for (const { sessions } of listeners?.values() ?? []) for (const session of sessions ?? []) session.destroy();
}
