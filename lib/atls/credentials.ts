/**
 * TLS for attested channels. The server makes a fresh self-signed ECDSA P-256 certificate when it starts;
 * clients accept any server certificate, because the attestation inside the channel (not the TLS chain)
 * authenticates the peer. TLS still keeps the exchange confidential against passive observers.
 */
import type { ChannelCredentials, ChannelOptions, ServerCredentials } from '@grpc/grpc-js';
import { createSelfSignedCertificate } from './self-signed.js';

/** The TLS server name clients send, so that no IP address goes into SNI (Node warns about that, RFC 6066). */
const TLS_SERVER_NAME = 'constellation';

/** Server credentials with a self-signed certificate made now (valid for a year). */
export async function createAttestedServerCredentials(): Promise<ServerCredentials> {
  const { ServerCredentials } = await import('@grpc/grpc-js');
  const { cert, key } = await createSelfSignedCertificate(TLS_SERVER_NAME);
  return ServerCredentials.createSsl(null, [{ private_key: Buffer.from(key), cert_chain: Buffer.from(cert) }], false);
}

/** Client credentials that accept the server's self-signed certificate (see the module header for why). */
export async function createAttestedClientCredentials(): Promise<ChannelCredentials> {
  const { credentials } = await import('@grpc/grpc-js');
  return credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined });
}

/** Channel options to pass with createAttestedClientCredentials(); no channelz (nothing reads it: per-call bookkeeping only). */
export const attestedChannelOptions: ChannelOptions = { 'grpc.ssl_target_name_override': TLS_SERVER_NAME, 'grpc.enable_channelz': 0 };
