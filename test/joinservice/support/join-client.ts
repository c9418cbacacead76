/**
 * The node side of a join, for tests and the bench: connects to the join service, sends the JoinHello,
 * attests with `issuer`, and returns the opened ticket, or the error, plus every response case that came
 * over the wire (so tests can assert that a refused node got no Sealed message).
 */
import { createHash, webcrypto } from 'node:crypto';
import type { Issuer } from '../../../lib/attestation/types.js';
import {
  attestedChannelOptions,
  attestedClient,
  createAttestedClientCredentials,
  joinClientAdapter,
  joinHelloBoundFields,
} from '../../../lib/atls/index.js';
import {
  JoinServiceClient,
  JoinTicket,
  RejoinTicket,
  SignedTicket,
  type JoinHello,
  type JoinResponse,
} from '../../../proto/gen/constellation/join.js';
import * as x509 from '../../support/x509.js';
import { TEST_NODE_IP } from './software-vtpm.js';

let credentials: ReturnType<typeof createAttestedClientCredentials> | undefined;
/** Made once: building TLS credentials loads the root store (tens of ms), a cost a real node pays once per boot. */
const clientCredentials = () => (credentials ??= createAttestedClientCredentials());

export interface JoinAttempt<T> {
  ticket?: T;
  error?: Error;
  /** The oneof cases of every response, in order. */
  responses: string[];
  /** What was sealed: the ticket's bytes and the join service's signature. */
  signed?: SignedTicket;
  /** The node's ephemeral key of the exchange (the signature covers it). */
  nodeKey?: Uint8Array;
}

export async function requestTicket(
  address: string,
  issuer: Issuer,
  hello: JoinHello,
  kind: 'join',
): Promise<JoinAttempt<JoinTicket>>;
export async function requestTicket(
  address: string,
  issuer: Issuer,
  hello: JoinHello,
  kind: 'rejoin',
): Promise<JoinAttempt<RejoinTicket>>;
export async function requestTicket(
  address: string,
  issuer: Issuer,
  hello: JoinHello,
  kind: 'join' | 'rejoin',
): Promise<JoinAttempt<JoinTicket | RejoinTicket>> {
  // Its own subchannel pool: its own connection, as each node has (grpc-js would otherwise share one between
  // clients, and search one process-wide pool that grows with every client).
  const client = new JoinServiceClient(address, await clientCredentials(), {
    ...attestedChannelOptions,
    'grpc.use_local_subchannel_pool': 1,
  });
  const call = kind === 'join' ? client.issueJoinTicket() : client.issueRejoinTicket();
  const responses: string[] = [];
  call.on('data', (message: JoinResponse) => responses.push(message.kind?.$case ?? 'empty'));
  try {
    const session = await attestedClient(call, joinClientAdapter, {
      purpose: kind,
      peer: 'the join service',
      issuer,
      bound: joinHelloBoundFields(hello),
      hello: { kind: { $case: 'hello', value: hello } },
      timeoutMs: 10_000,
    });
    session.channel.end();
    const signed = SignedTicket.decode(session.secrets);
    return {
      ticket: kind === 'join' ? JoinTicket.decode(signed.ticket) : RejoinTicket.decode(signed.ticket),
      responses,
      signed,
      nodeKey: session.publicKey,
    };
  } catch (error) {
    return { error: error as Error, responses };
  } finally {
    client.close();
  }
}

/** A kubelet CSR (DER) made with @peculiar/x509, an implementation independent of the one that signs it. */
export async function kubeletCsr(ips: string[] = [TEST_NODE_IP]): Promise<Buffer> {
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=node',
    keys,
    signingAlgorithm: algorithm,
    extensions: [new x509.SubjectAlternativeNameExtension(ips.map((value) => ({ type: 'ip' as const, value })))],
  });
  return Buffer.from(csr.rawData);
}

/** A JoinHello; each node name has its own disk (a disk belongs to the instance that first claimed it). */
export function hello(fields: Partial<JoinHello> = {}): JoinHello {
  const nodeName = fields.nodeName ?? 'worker-0';
  return {
    diskUuid: diskUuidOf(nodeName),
    certificateRequest: Buffer.alloc(0),
    isControlPlane: false,
    nodeName,
    hostPublicKey: Buffer.alloc(0),
    ...fields,
  };
}

/** A UUID (v4 form) that is the same for the same node name. */
export function diskUuidOf(nodeName: string): string {
  const h = createHash('sha256').update(nodeName).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
