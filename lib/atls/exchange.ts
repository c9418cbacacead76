/**
 * The two roles of an attested exchange (docs/design.md#attested-channels), each usable from either end of a gRPC stream:
 *
 *   verifier                                      attested side
 *   Challenge(nonce, verifier key if a reply) ->
 *                                              <- Evidence(document, ephemeral key)
 *   validate document, check userData binding
 *   Sealed(secrets to the ephemeral key)      ->   (or Failure / end of stream: nothing sealed)
 *
 * The verifier seals nothing before the document passed the validator AND its userData equals
 * attestedUserData(purpose, the attested side's key, the verifier's key, bound fields); a document
 * replayed from another exchange fails the nonce, one made for another purpose or key fails the binding.
 * On failure the verifier sends a Failure with the reason where the stream can carry one (join service →
 * node) and otherwise ends its side of the stream (CLI → node: init and recover requests have no Failure).
 *
 * verifierClient / verifierServer / attestedClient / attestedServer are the four ways services use this;
 * each returns a session whose channel carries the rest of the service's conversation.
 */
import { randomBytes as nodeRandomBytes } from 'node:crypto';
import {
  AttestationError,
  type AttestationDocument,
  type Issuer,
  type ValidationResult,
  type Validator,
} from '../attestation/types.js';
import { UserError } from '../errors.js';
import { AtlsChannel, PeerFailureError, type DuplexStream, type WireAdapter } from './channel.js';
import { parseAttestationDocument } from './document.js';
import { checkPublicKey, generateEphemeralKeyPair } from './keys.js';
import { seal, unseal, type ExchangeBinding } from './seal.js';
import { attestedUserData, type Purpose } from './user-data.js';

export const NONCE_LENGTH = 32;

type BoundFields = ReadonlyArray<Uint8Array | string>;

export interface ExchangeOptions {
  purpose: Purpose;
  /** Names the peer in messages, e.g. "the bootstrapper at 10.0.0.1:9000". */
  peer: string;
  /** Longest wait for any one message of the exchange. */
  timeoutMs?: number;
}

export interface VerifierOptions extends ExchangeOptions {
  validator: Validator;
  /** Request fields the attested side must have bound into userData (client side; servers take them from the hello). */
  bound?: BoundFields;
  /** Send the verifier's own ephemeral key, so the attested side can seal a reply (init's kubeconfig). */
  expectReply?: boolean;
  /** The plaintext to seal to the attested side; called only after its attestation passed. */
  secrets: (peer: VerifiedPeer) => Uint8Array | Promise<Uint8Array>;
  /** Source of nonces; tests inject one to replay. */
  randomBytes?: (length: number) => Uint8Array;
}

export interface VerifiedPeer {
  document: AttestationDocument;
  result: ValidationResult;
  /** The attested side's ephemeral public key, to which secrets were sealed. */
  publicKey: Uint8Array;
}

export interface VerifierSession<Out, In> {
  peer: VerifiedPeer;
  binding: ExchangeBinding;
  channel: AtlsChannel<Out, In>;
  /** Opens a message the attested side sealed to the verifier's key (needs expectReply). */
  unseal(jwe: string): Promise<Uint8Array>;
}

export interface AttestedOptions extends ExchangeOptions {
  issuer: Issuer;
  /** Request fields to bind into userData (the same the verifier expects, in the same order). */
  bound?: BoundFields;
}

export interface AttestedSession<Out, In> {
  /** The opened plaintext the verifier sealed. */
  secrets: Uint8Array;
  /** This side's ephemeral public key of the exchange (the verifier sealed to it): fresh per exchange. */
  publicKey: Uint8Array;
  binding: ExchangeBinding;
  channel: AtlsChannel<Out, In>;
  /** Seals a reply to the verifier's key (a UserError when the verifier sent none). */
  sealToVerifier(plaintext: Uint8Array): Promise<string>;
}

/** Verifier as gRPC client (CLI → bootstrapper Init, CLI → Recover). */
export async function verifierClient<Out, In>(
  call: DuplexStream<Out, In>,
  adapter: WireAdapter<Out, In>,
  options: VerifierOptions,
): Promise<VerifierSession<Out, In>> {
  const channel = new AtlsChannel(call, adapter, options);
  return verifyAndSeal(channel, options, options.bound ?? []);
}

/**
 * Verifier as gRPC server (join service). With `hello`, the first message is the attested side's request
 * (JoinHello); `hello.bound` names the fields of it that must be bound into the document.
 */
export async function verifierServer<Out, In>(
  call: DuplexStream<Out, In>,
  adapter: WireAdapter<Out, In>,
  options: VerifierOptions & { hello?: { what: string; bound: (message: In) => BoundFields } },
): Promise<VerifierSession<Out, In> & { hello?: In }> {
  const channel = new AtlsChannel(call, adapter, options);
  let hello: In | undefined;
  let bound = options.bound ?? [];
  if (options.hello) {
    try {
      hello = (await channel.receive(['other'], options.hello.what)).value;
      bound = options.hello.bound(hello);
    } catch (err) {
      channel.fail(reasonOf(err));
      throw err;
    }
  }
  return { ...(await verifyAndSeal(channel, options, bound)), hello };
}

/** Attested side as gRPC server (bootstrapper init and recovery servers). */
export async function attestedServer<Out, In>(
  call: DuplexStream<Out, In>,
  adapter: WireAdapter<Out, In>,
  options: AttestedOptions,
): Promise<AttestedSession<Out, In>> {
  return attestAndReceive(new AtlsChannel(call, adapter, options), options);
}

/** Attested side as gRPC client (a node joining). `hello` (the JoinHello request) is sent first. */
export async function attestedClient<Out, In>(
  call: DuplexStream<Out, In>,
  adapter: WireAdapter<Out, In>,
  options: AttestedOptions & { hello?: Out },
): Promise<AttestedSession<Out, In>> {
  const channel = new AtlsChannel(call, adapter, options);
  if (options.hello !== undefined) channel.sendOther(options.hello);
  return attestAndReceive(channel, options);
}

/**
 * Checks Evidence against the exchange: a valid ephemeral key, a document the validator accepts for this
 * nonce, and userData binding purpose, keys and request fields. Throws AttestationError (or UserError).
 */
export async function checkEvidence(
  evidence: { document: Uint8Array; publicKey: Uint8Array },
  expected: {
    validator: Validator;
    purpose: Purpose;
    nonce: Uint8Array;
    verifierPublicKey?: Uint8Array;
    bound?: BoundFields;
  },
): Promise<VerifiedPeer> {
  // The verify service has no ephemeral key (nothing is sealed); every other purpose must bring a valid one.
  if (expected.purpose !== 'verify') checkPublicKey(evidence.publicKey);
  const document = parseAttestationDocument(evidence.document);
  const result = await expected.validator.validate(document, expected.nonce);
  const userData = attestedUserData({
    purpose: expected.purpose,
    publicKey: evidence.publicKey,
    verifierPublicKey: expected.verifierPublicKey,
    bound: expected.bound,
  });
  if (!Buffer.from(result.userData).equals(userData)) {
    throw new AttestationError(
      `The attestation document is not bound to this ${expected.purpose} exchange: its userData does not match the purpose, the public key and the request fields.`,
      result.comparisons,
    );
  }
  return { document, result, publicKey: new Uint8Array(evidence.publicKey) };
}

async function verifyAndSeal<Out, In>(
  channel: AtlsChannel<Out, In>,
  options: VerifierOptions,
  bound: BoundFields,
): Promise<VerifierSession<Out, In>> {
  const nonce = (options.randomBytes ?? nodeRandomBytes)(NONCE_LENGTH);
  const binding: ExchangeBinding = { purpose: options.purpose, nonce };
  try {
    const own = options.expectReply ? generateEphemeralKeyPair() : undefined;
    const verifierPublicKey = own?.publicKey ?? new Uint8Array(0);
    channel.send({
      kind: 'challenge',
      value: { nonce: Buffer.from(nonce), verifierPublicKey: Buffer.from(verifierPublicKey) },
    });
    // The sealing key is made while the evidence is on its way; it seals this exchange's one message.
    const sealingKey = generateEphemeralKeyPair();
    const evidence = (await channel.receive(['evidence'], 'the attestation evidence')).value;
    const peer = await checkEvidence(evidence, {
      validator: options.validator,
      purpose: options.purpose,
      nonce,
      verifierPublicKey,
      bound,
    });
    const jwe = seal(await options.secrets(peer), peer.publicKey, binding, sealingKey);
    channel.send({ kind: 'sealed', value: { jwe } });
    return {
      peer,
      binding,
      channel,
      unseal: async (sealed) => {
        if (!own) throw new Error('unseal needs expectReply: the verifier sent no public key');
        return unseal(sealed, own.privateKey, binding);
      },
    };
  } catch (err) {
    if (!(err instanceof PeerFailureError))
      channel.fail(err instanceof AttestationError ? `attestation rejected: ${err.message}` : reasonOf(err));
    throw err;
  }
}

async function attestAndReceive<Out, In>(
  channel: AtlsChannel<Out, In>,
  options: AttestedOptions,
): Promise<AttestedSession<Out, In>> {
  try {
    // Made while the challenge is on its way: a fresh key for this exchange alone, off the critical path.
    const keys = generateEphemeralKeyPair();
    const challenge = (await channel.receive(['challenge'], 'the challenge')).value;
    if (challenge.nonce.length !== NONCE_LENGTH) {
      throw new UserError(
        `The verifier sent a ${challenge.nonce.length}-byte nonce; a fresh ${NONCE_LENGTH}-byte nonce is required.`,
      );
    }
    const verifierPublicKey = new Uint8Array(challenge.verifierPublicKey);
    if (verifierPublicKey.length > 0) checkPublicKey(verifierPublicKey);
    const binding: ExchangeBinding = { purpose: options.purpose, nonce: new Uint8Array(challenge.nonce) };
    const userData = attestedUserData({
      purpose: options.purpose,
      publicKey: keys.publicKey,
      verifierPublicKey,
      bound: options.bound,
    });
    const document = await options.issuer.issue(userData, binding.nonce);
    channel.send({
      kind: 'evidence',
      value: { document: Buffer.from(JSON.stringify(document)), publicKey: Buffer.from(keys.publicKey) },
    });
    const sealed = (
      await channel.receive(['sealed'], 'the sealed secrets (a verifier that rejects this attestation sends none)')
    ).value;
    const secrets = unseal(sealed.jwe, keys.privateKey, binding);
    return {
      secrets,
      publicKey: new Uint8Array(keys.publicKey),
      binding,
      channel,
      sealToVerifier: async (plaintext) => {
        if (verifierPublicKey.length === 0)
          throw new UserError('The verifier sent no public key, so nothing can be sealed back to it.');
        return seal(plaintext, verifierPublicKey, binding);
      },
    };
  } catch (err) {
    if (!(err instanceof PeerFailureError)) channel.fail(reasonOf(err));
    throw err;
  }
}

/** What the peer may learn about a local failure: a UserError's message; for anything else, no detail. */
function reasonOf(err: unknown): string {
  return err instanceof UserError ? err.message : 'internal error';
}
