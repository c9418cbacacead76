/**
 * The verify service (port 30081): one unary call, nonce in, attestation document out, with userData binding
 * purpose "verify" and the nonce. No secret crosses it, so no ephemeral keys; it proves what a node runs
 * (and, through PCR 15, that it belongs to this cluster).
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type {
  GetAttestationRequest,
  GetAttestationResponse,
  VerifyServer,
} from '../../proto/gen/constellation/verify.js';
import type { Issuer, Validator } from '../attestation/types.js';
import { UserError } from '../errors.js';
import { attestedChannelOptions, createAttestedClientCredentials } from './credentials.js';
import { checkEvidence, NONCE_LENGTH, type VerifiedPeer } from './exchange.js';
import { attestedUserData } from './user-data.js';

/** The verify service's userData: purpose "verify" bound to the nonce. */
export function verifyUserData(nonce: Uint8Array): Uint8Array {
  return attestedUserData({ purpose: 'verify', publicKey: new Uint8Array(0), bound: [nonce] });
}

/** The server side's GetAttestation handler, answering with a document from `issuer` (GetStatus is the bootstrapper's). */
export function createVerifyHandler(issuer: Issuer): Pick<VerifyServer, 'getAttestation'> {
  return {
    getAttestation(
      call: ServerUnaryCall<GetAttestationRequest, GetAttestationResponse>,
      callback: sendUnaryData<GetAttestationResponse>,
    ) {
      const { nonce } = call.request;
      if (nonce.length !== NONCE_LENGTH) {
        // 3 = INVALID_ARGUMENT
        callback({ code: 3, details: `the nonce must be ${NONCE_LENGTH} bytes, got ${nonce.length}` });
        return;
      }
      issuer.issue(verifyUserData(nonce), nonce).then(
        (document) => callback(null, { document: Buffer.from(JSON.stringify(document)) }),
        // 13 = INTERNAL. A UserError's message is meant to be shown; anything else stays on the node.
        (err: unknown) =>
          callback({
            code: 13,
            details: err instanceof UserError ? err.message : 'the node could not make an attestation document',
          }),
      );
    },
  };
}

export interface VerifyRequestOptions {
  validator: Validator;
  /** Fresh 32 bytes by default. */
  nonce?: Uint8Array;
  timeoutMs?: number;
}

/** The client side: asks the verify service at `address` (host:port) for a document and validates it. */
export async function requestVerifiedAttestation(
  address: string,
  options: VerifyRequestOptions,
): Promise<VerifiedPeer & { nonce: Uint8Array }> {
  const [{ VerifyClient }, { Metadata }, { randomBytes }] = await Promise.all([
    import('../../proto/gen/constellation/verify.js'),
    import('@grpc/grpc-js'),
    import('node:crypto'),
  ]);
  const nonce = options.nonce ?? new Uint8Array(randomBytes(NONCE_LENGTH));
  const client = new VerifyClient(address, await createAttestedClientCredentials(), attestedChannelOptions);
  try {
    const response = await new Promise<GetAttestationResponse>((resolve, reject) => {
      client.getAttestation(
        { nonce: Buffer.from(nonce) },
        new Metadata(),
        { deadline: Date.now() + (options.timeoutMs ?? 30_000) },
        (err, res) => {
          if (err) {
            reject(
              new UserError(`The verify service at ${address} did not answer: ${err.details || err.message}`, {
                hint: 'Check the address (the verify service listens on port 30081) and that the node runs.',
                cause: err,
              }),
            );
          } else resolve(res);
        },
      );
    });
    const peer = await checkEvidence(
      { document: response.document, publicKey: new Uint8Array(0) },
      { validator: options.validator, purpose: 'verify', nonce, bound: [nonce] },
    );
    return { ...peer, nonce };
  } finally {
    client.close();
  }
}
