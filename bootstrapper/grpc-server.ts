/**
 * One gRPC server of the node (init, verify, recovery): TLS with a fresh self-signed certificate (the
 * attestation inside the channel authenticates the node, DESIGN §6), bound to the node's address. Closing
 * lets running calls finish for a moment, then cuts them off, so a node shuts down promptly on SIGTERM.
 */
import { Server, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { createAttestedServerCredentials } from '../lib/atls/index.js';
import { UserError } from '../lib/errors.js';
import { bindAddress } from './addresses.js';

export interface NodeServer {
  /** The bound port (the requested one, or the one the OS picked for 0). */
  port: number;
  close(): Promise<void>;
}

const SHUTDOWN_GRACE_MS = 2_000;

export async function startNodeServer(
  what: string,
  service: ServiceDefinition,
  implementation: UntypedServiceImplementation,
  address: { host: string; port: number },
): Promise<NodeServer> {
  const server = new Server();
  server.addService(service, implementation);
  const target = bindAddress(address.host, address.port);
  const credentials = await createAttestedServerCredentials();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(target, credentials, (err, bound) =>
      err
        ? reject(new UserError(`The ${what} cannot listen on ${target}: ${err.message}`, { hint: 'Is another process using the port?', cause: err }))
        : resolve(bound),
    );
  });
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      })),
  };
}
