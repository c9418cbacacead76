/**
 * The cryptography of one TLS 1.3 handshake, as node:crypto primitives only (no sockets, no record layer, no
 * message parsing), for the join storm's cryptographic limit: each node opens a fresh connection, so every
 * join pays one handshake. The parameters are what a client negotiates with our attested gRPC server on this
 * Node.js (checkHandshakeParameters asks the running server): TLS_AES_256_GCM_SHA384 with an X25519 key
 * share and the server's ECDSA P-256 certificate.
 *   - key share: X25519 key pair on each side and the shared secret on each side;
 *   - the server's certificate signature: the server signs CertificateVerify (ECDSA P-256, SHA-256), the
 *     client verifies it;
 *   - the key schedule (RFC 8446 §7.1, HKDF-SHA384) on both sides: early, handshake and master secrets,
 *     traffic secrets, their keys and IVs, both Finished MACs, and the resumption PSKs of the two session
 *     tickets an OpenSSL server sends.
 * Left out (a few µs): transcript hashes, AES-GCM of the handshake records, session ticket encryption.
 */
import tls from 'node:tls';
import {
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { createSelfSignedCertificate } from '../../lib/atls/self-signed.js';
import { median, WARM_UP_ROUNDS } from './stats.js';

export interface HandshakeCrypto {
  /** X25519: two key pairs and two shared secrets. */
  keyShare: number;
  /** ECDSA P-256 CertificateVerify: server sign + client verify. */
  signature: number;
  /** HKDF-SHA384 key schedule of both sides. */
  keySchedule: number;
  /** The median round (not the sum of the medians). */
  total: number;
}

const HASH = 'sha384';
const HASH_LENGTH = 48;
const KEY_LENGTH = 32; // AES-256-GCM
const IV_LENGTH = 12;
const SESSION_TICKETS = 2; // OpenSSL's default for a TLS 1.3 server
/** Transcript-Hash(""), the context of the two "derived" secrets. */
const EMPTY_HASH = createHash(HASH).digest();

const MODELLED_HANDSHAKE = 'TLSv1.3 TLS_AES_256_GCM_SHA384 X25519, certificate key prime256v1';

/**
 * Connects once to a server of ours and returns what was negotiated, as in MODELLED_HANDSHAKE; throws when it
 * is not that (the measurement would then be of another handshake).
 */
export async function checkHandshakeParameters(host: string, port: number): Promise<string> {
  const negotiated = await new Promise<string>((resolve, reject) => {
    const socket = tls.connect(
      { host, port, servername: 'constellation', rejectUnauthorized: false, ALPNProtocols: ['h2'] },
      () => {
        const curve = socket.getPeerX509Certificate()?.publicKey.asymmetricKeyDetails?.namedCurve ?? '(not EC)';
        resolve(
          `${socket.getProtocol()} ${socket.getCipher().standardName} ${(socket.getEphemeralKeyInfo() as { name?: string } | null)?.name ?? '(no key share)'}, certificate key ${curve}`,
        );
        socket.destroy();
      },
    );
    socket.once('error', reject);
  });
  if (negotiated !== MODELLED_HANDSHAKE)
    throw new Error(
      `the server negotiates ${negotiated}, but the handshake cryptography measured is ${MODELLED_HANDSHAKE}`,
    );
  return negotiated;
}

/** Milliseconds of each part of one handshake's cryptography: medians over `rounds` rounds after a warm-up. */
export async function measureHandshakeCrypto(rounds: number): Promise<HandshakeCrypto> {
  // The server's certificate key, as the join service makes it (once per start, so not timed).
  const { key } = await createSelfSignedCertificate('constellation');
  const serverKey = createPrivateKey(key);
  const serverPublic = createPublicKey(serverKey);
  const parts = {
    keyShare: [] as number[],
    signature: [] as number[],
    keySchedule: [] as number[],
    total: [] as number[],
  };
  for (let round = -WARM_UP_ROUNDS; round < rounds; round++) {
    const transcript = randomBytes(HASH_LENGTH); // stands in for the transcript hashes the steps take as input

    let t = performance.now();
    const client = generateKeyPairSync('x25519');
    const server = generateKeyPairSync('x25519');
    const serverShared = diffieHellman({ privateKey: server.privateKey, publicKey: client.publicKey });
    const clientShared = diffieHellman({ privateKey: client.privateKey, publicKey: server.publicKey });
    const keyShare = performance.now() - t;

    t = performance.now();
    certificateVerify(serverKey, serverPublic, transcript);
    const signature = performance.now() - t;

    t = performance.now();
    keySchedule(serverShared, transcript);
    keySchedule(clientShared, transcript);
    const schedule = performance.now() - t;

    if (round >= 0) {
      parts.keyShare.push(keyShare);
      parts.signature.push(signature);
      parts.keySchedule.push(schedule);
      parts.total.push(keyShare + signature + schedule);
    }
  }
  return {
    keyShare: median(parts.keyShare),
    signature: median(parts.signature),
    keySchedule: median(parts.keySchedule),
    total: median(parts.total),
  };
}

/** RFC 8446 §4.4.3: the server signs 64 spaces ‖ context string ‖ 0 ‖ transcript hash; the client verifies. */
function certificateVerify(serverKey: KeyObject, serverPublic: KeyObject, transcript: Buffer): void {
  const content = Buffer.concat([
    Buffer.alloc(64, 0x20),
    Buffer.from('TLS 1.3, server CertificateVerify\0', 'latin1'),
    transcript,
  ]);
  const signature = sign('sha256', content, serverKey);
  if (!verify('sha256', content, serverPublic, signature))
    throw new Error('CertificateVerify signature did not verify');
}

/** One side's key schedule (RFC 8446 §7.1, §7.3, §4.4.4, §4.6.1) from the (EC)DHE shared secret. */
function keySchedule(shared: Buffer, transcript: Buffer): void {
  const zeros = Buffer.alloc(HASH_LENGTH);
  const empty = Buffer.alloc(0);
  const early = extract(zeros, zeros);
  const handshake = extract(deriveSecret(early, 'derived', EMPTY_HASH), shared);
  const handshakeTraffic = [
    deriveSecret(handshake, 'c hs traffic', transcript),
    deriveSecret(handshake, 's hs traffic', transcript),
  ];
  const master = extract(deriveSecret(handshake, 'derived', EMPTY_HASH), zeros);
  const applicationTraffic = [
    deriveSecret(master, 'c ap traffic', transcript),
    deriveSecret(master, 's ap traffic', transcript),
  ];
  deriveSecret(master, 'exp master', transcript);
  const resumption = deriveSecret(master, 'res master', transcript);
  for (const secret of [...handshakeTraffic, ...applicationTraffic]) {
    expandLabel(secret, 'key', empty, KEY_LENGTH);
    expandLabel(secret, 'iv', empty, IV_LENGTH);
  }
  for (const secret of handshakeTraffic)
    createHmac(HASH, expandLabel(secret, 'finished', empty, HASH_LENGTH))
      .update(transcript)
      .digest();
  for (let i = 0; i < SESSION_TICKETS; i++) expandLabel(resumption, 'resumption', Buffer.of(i), HASH_LENGTH);
}

function extract(salt: Buffer, ikm: Buffer): Buffer {
  return createHmac(HASH, salt).update(ikm).digest();
}

function deriveSecret(secret: Buffer, label: string, transcript: Buffer): Buffer {
  return expandLabel(secret, label, transcript, HASH_LENGTH);
}

/** HKDF-Expand-Label for outputs up to one hash block (all of TLS 1.3's): one HMAC. */
function expandLabel(secret: Buffer, label: string, context: Buffer, length: number): Buffer {
  const fullLabel = Buffer.from(`tls13 ${label}`, 'latin1');
  const info = Buffer.concat([
    Buffer.of(length >> 8, length & 0xff, fullLabel.length),
    fullLabel,
    Buffer.of(context.length),
    context,
    Buffer.of(1),
  ]);
  return createHmac(HASH, secret).update(info).digest().subarray(0, length);
}
