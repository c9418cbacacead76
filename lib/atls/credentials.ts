/**
 * TLS for attested channels. The server makes a fresh self-signed ECDSA P-256 certificate when it starts;
 * clients accept any server certificate, because the attestation inside the channel (not the TLS chain)
 * authenticates the peer. TLS still keeps the exchange confidential against passive observers.
 *
 * Neither side therefore needs certificate authorities: servers get none, clients one TLS context without any,
 * made once per process and shared by every client. (grpc-js's createSsl makes a context per call and, where
 * GRPC_DEFAULT_SSL_ROOTS_FILE_PATH is set, parses that whole CA bundle each time: 60-70 ms of CPU per connection
 * attempt and per server on this machine.)
 */
import type { ChannelCredentials, ChannelOptions, ServerCredentials } from '@grpc/grpc-js';
import { createSecureContext, type SecureContext } from 'node:tls';
import { createSelfSignedCertificate } from './self-signed.js';

/** The TLS server name clients send, so that no IP address goes into SNI (Node warns about that, RFC 6066). */
const TLS_SERVER_NAME = 'constellation';

/** Server credentials with a self-signed certificate made now (valid for a year). */
export async function createAttestedServerCredentials(): Promise<ServerCredentials> {
  const { ServerCredentials } = await import('@grpc/grpc-js');
  const { cert, key } = await createSelfSignedCertificate(TLS_SERVER_NAME);
  // No client certificates are asked for, so no CA either (an empty list rather than grpc-js's default bundle).
  return ServerCredentials.createSsl(
    Buffer.alloc(0),
    [{ private_key: Buffer.from(key), cert_chain: Buffer.from(cert) }],
    false,
  );
}

/** Client credentials that accept the server's self-signed certificate (see the module header for why). */
export async function createAttestedClientCredentials(): Promise<ChannelCredentials> {
  const { credentials } = await import('@grpc/grpc-js');
  clientContext ??= createSecureContext({ ca: [] });
  // A new checkServerIdentity per call keeps grpc-js from treating two clients' credentials as equal, so no two
  // clients share a connection (as with createSsl, which this replaces).
  return credentials.createFromSecureContext(clientContext, {
    rejectUnauthorized: false,
    checkServerIdentity: () => undefined,
  });
}

let clientContext: SecureContext | undefined;

/** Channel options to pass with createAttestedClientCredentials(); no channelz (nothing reads it: per-call bookkeeping only). */
export const attestedChannelOptions: ChannelOptions = {
  'grpc.ssl_target_name_override': TLS_SERVER_NAME,
  'grpc.enable_channelz': 0,
};
