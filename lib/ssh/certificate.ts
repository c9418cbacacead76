/**
 * Emergency SSH access (docs/workflows/emergency-ssh.md), as upstream Constellation's `constellation ssh`
 * (cli/internal/cmd/ssh.go there): a cluster-wide SSH certificate authority whose Ed25519 key is derived from the
 * master secret, and OpenSSH user certificates it signs for a user's own public key.
 *
 * - The CA key's 32-byte seed is HKDF-SHA256(masterKey, masterSalt, "key-ca_emergency_ssh", 32): upstream's
 *   `crypto.DEKPrefix + constants.SSHCAKeySuffix` through its cluster KMS (`GetDEK`), used as the Ed25519 seed
 *   (`crypto.GenerateEmergencySSHCAKey`). The same master secret gives the same CA here and upstream, and every
 *   holder of the master secret (the CLI, the first control plane at init, every join service) derives the same
 *   CA, so nodes need no other key to trust it.
 * - A certificate is for the principal `root`, valid for 24 hours (upstream's validity) from five minutes before its
 *   signing (./emergency-access.ts), with the extensions `permit-port-forwarding` and `permit-pty` (upstream's), and
 *   no critical options.
 *
 * Why our own encoder: the OpenSSH certificate format (PROTOCOL.certkeys in OpenSSH's sources) is a short sequence
 * of SSH wire strings and integers, signed with the CA key; node:crypto signs Ed25519. The npm libraries that write
 * certificates (sshpk) would be a dependency for ~100 lines. The tests cross-check every certificate with
 * `ssh-keygen -L` and with a real sshd that accepts it.
 */
import { createPrivateKey, createPublicKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { UserError } from '../errors.js';
import { hkdfSha256, type MasterSecret } from '../kms/keys.js';

/** HKDF info of the CA key's seed: upstream's DEKPrefix "key-" + SSHCAKeySuffix "ca_emergency_ssh". */
export const SSH_CA_KEY_INFO = 'key-ca_emergency_ssh';
export const SSH_CA_SEED_LENGTH = 32;
/** Upstream's validity of an emergency certificate. */
export const SSH_CERTIFICATE_VALIDITY_SECONDS = 24 * 60 * 60;
/**
 * How long before its signing a certificate (user or host) is valid: its checker's clock may lag the signer's (a VM
 * sets its clock at boot from a real-time clock that counts whole seconds), and OpenSSH refuses a certificate from
 * its future.
 */
export const SSH_CLOCK_SLACK_SECONDS = 300;
/** The user a certificate lets in (upstream's only principal). */
export const SSH_CERTIFICATE_PRINCIPALS: readonly string[] = ['root'];
/** Sorted by name, as PROTOCOL.certkeys requires. */
const EXTENSIONS = ['permit-port-forwarding', 'permit-pty'];
const SSH_CERT_TYPE_USER = 1;
const SSH_CERT_TYPE_HOST = 2;
/** OpenSSH's "forever" as a certificate's valid-before. */
const CERT_TIME_INFINITY = 0xffffffffffffffffn;
const ED25519 = 'ssh-ed25519';
/** PKCS#8 DER of an Ed25519 private key, up to the 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
/** SubjectPublicKeyInfo DER of an Ed25519 public key, up to the 32-byte key (RFC 8410). */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Public key types a certificate can be made for (OpenSSH's), each with its certificate type. */
const KEY_TYPES = [
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com',
  'sk-ecdsa-sha2-nistp256@openssh.com',
];

export interface SshCa {
  /** The CA's private key (never leaves the process that derived it). */
  privateKey: KeyObject;
  /** The raw 32-byte Ed25519 public key. */
  publicKey: Uint8Array;
}

/** The cluster's emergency SSH CA, from the master secret. */
export function deriveSshCa(master: MasterSecret): SshCa {
  return ed25519KeyFromSeed(hkdfSha256(master.key, master.salt, SSH_CA_KEY_INFO, SSH_CA_SEED_LENGTH));
}

/** An Ed25519 key from its 32-byte seed (RFC 8410): the private key and the raw 32-byte public key. */
export function ed25519KeyFromSeed(seed: Uint8Array): { privateKey: KeyObject; publicKey: Uint8Array } {
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  return { privateKey, publicKey: new Uint8Array(spki.subarray(SPKI_PREFIX.length)) };
}

/** The CA's public key as one authorized_keys line ("ssh-ed25519 AAAA… comment\n"): what sshd's TrustedUserCAKeys reads. */
export function sshCaPublicKeyLine(publicKey: Uint8Array, comment = 'constellation-emergency-ssh-ca'): string {
  return `${ED25519} ${Buffer.from(ed25519Blob(publicKey)).toString('base64')} ${comment}\n`;
}

export interface ParsedPublicKey {
  type: string;
  /** The SSH wire encoding of the key (string type, then the type's fields). */
  blob: Uint8Array;
  comment: string;
}

/** One OpenSSH public key line ("<type> <base64> [comment]"), as in id_ed25519.pub; `file` only names it in messages. */
export function parseSshPublicKey(text: string, file: string): ParsedPublicKey {
  const hint =
    'Pass the public half of an SSH key (the .pub file, e.g. ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.';
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
    throw new UserError(`${file} is a private key; constellation ssh needs the public key.`, { hint });
  }
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  if (lines.length !== 1)
    throw new UserError(`${file} is not one SSH public key (it has ${lines.length} key lines).`, { hint });
  const [type, base64, ...rest] = lines[0].split(/\s+/);
  if (type.includes('-cert-v01@')) throw new UserError(`${file} is an SSH certificate, not a public key.`, { hint });
  if (!KEY_TYPES.includes(type)) {
    throw new UserError(
      `${file} holds a key of type "${type.slice(0, 40)}", which is not an SSH public key type this command signs.`,
      {
        hint: `Supported types: ${KEY_TYPES.join(', ')}. ${hint}`,
      },
    );
  }
  const blob = base64 && /^[A-Za-z0-9+/]+={0,2}$/.test(base64) ? Buffer.from(base64, 'base64') : Buffer.alloc(0);
  const reader = new WireReader(blob);
  let blobType: string;
  try {
    blobType = reader.string().toString('utf8');
  } catch {
    blobType = '';
  }
  if (blobType !== type || reader.remaining() === 0)
    throw new UserError(`${file} has a damaged ${type} key (its base64 part does not hold a ${type} key).`, { hint });
  return { type, blob: new Uint8Array(blob), comment: rest.join(' ') };
}

export interface CertificateOptions {
  /** Seconds since the epoch from which the certificate is valid (upstream: now). */
  validAfter: number;
  /** Seconds since the epoch until which it is valid (upstream: now + 24 h). */
  validBefore: number;
  /** OpenSSH's key ID, which sshd logs on every login with the certificate. */
  keyId: string;
  principals?: readonly string[];
  serial?: bigint;
  /** 32 random bytes by default. */
  nonce?: Uint8Array;
}

/** The certificate type name of a key type: "ssh-ed25519" → "ssh-ed25519-cert-v01@openssh.com". */
export function certificateType(keyType: string): string {
  return keyType.endsWith('@openssh.com')
    ? keyType.replace('@openssh.com', '-cert-v01@openssh.com')
    : `${keyType}-cert-v01@openssh.com`;
}

/** An OpenSSH user certificate for `key`, signed by `ca`, as the one line of an id_*-cert.pub file. */
export function signUserCertificate(ca: SshCa, key: ParsedPublicKey, options: CertificateOptions): string {
  return signCertificate(
    ca,
    key,
    SSH_CERT_TYPE_USER,
    options.principals ?? SSH_CERTIFICATE_PRINCIPALS,
    EXTENSIONS,
    options,
  );
}

/**
 * An OpenSSH host certificate for a node's host key (upstream's crypto.GenerateSSHHostCertificate): the principals
 * are the names a client may reach the node by (its address and name), the key ID the first of them, valid from
 * `validAfter` on with no end (upstream's ssh.CertTimeInfinity), no extensions. A client that trusts the CA with an
 * `@cert-authority` known_hosts line (knownHostsCaLine) then accepts the node with no prompt.
 */
export function signHostCertificate(
  ca: SshCa,
  key: ParsedPublicKey,
  principals: readonly string[],
  validAfter: number,
): string {
  if (principals.length === 0) throw new Error('a host certificate needs at least one principal');
  return signCertificate(ca, key, SSH_CERT_TYPE_HOST, principals, [], {
    validAfter,
    validBefore: CERT_TIME_INFINITY,
    keyId: principals[0],
  });
}

/**
 * The known_hosts line that makes OpenSSH's client trust every host certificate of the cluster's CA (for any host
 * name: the certificate's principals say which hosts it is for).
 */
export function knownHostsCaLine(publicKey: Uint8Array): string {
  return `@cert-authority * ${sshCaPublicKeyLine(publicKey)}`;
}

/** A public key from its SSH wire encoding (the `host_public_key` of a join request); `what` names it in errors. */
export function publicKeyFromBlob(blob: Uint8Array, what: string): ParsedPublicKey {
  let type: string;
  const reader = new WireReader(Buffer.from(blob));
  try {
    type = reader.string().toString('utf8');
  } catch {
    type = '';
  }
  if (!KEY_TYPES.includes(type) || reader.remaining() === 0)
    throw new UserError(`${what} is not an SSH public key of a supported type.`);
  return { type, blob: new Uint8Array(blob), comment: '' };
}

function signCertificate(
  ca: SshCa,
  key: ParsedPublicKey,
  certKind: number,
  principals: readonly string[],
  extensions: readonly string[],
  options: CertificateOptions | (Omit<CertificateOptions, 'validBefore'> & { validBefore: bigint }),
): string {
  if (!(BigInt(options.validAfter) < BigInt(options.validBefore)))
    throw new Error('a certificate must be valid for some time');
  const certType = certificateType(key.type);
  const keyFields = key.blob.subarray(new WireReader(Buffer.from(key.blob)).skipString());
  const body = Buffer.concat([
    wireString(certType),
    wireString(options.nonce ?? randomBytes(32)),
    keyFields,
    uint64(options.serial ?? 0n),
    uint32(certKind),
    wireString(options.keyId),
    wireString(Buffer.concat(principals.map((p) => wireString(p)))),
    uint64(BigInt(options.validAfter)),
    uint64(BigInt(options.validBefore)),
    wireString(Buffer.alloc(0)), // critical options: none
    wireString(Buffer.concat(extensions.map((name) => Buffer.concat([wireString(name), wireString(Buffer.alloc(0))])))),
    wireString(Buffer.alloc(0)), // reserved
    wireString(ed25519Blob(ca.publicKey)),
  ]);
  const signature = sign(null, body, ca.privateKey);
  const cert = Buffer.concat([body, wireString(Buffer.concat([wireString(ED25519), wireString(signature)]))]);
  return `${certType} ${cert.toString('base64')}${key.comment ? ` ${key.comment}` : ''}\n`;
}

/** The SSH wire encoding of an Ed25519 public key (what a known_hosts or authorized_keys line holds in base64). */
export function ed25519PublicKeyBlob(publicKey: Uint8Array): Uint8Array {
  return new Uint8Array(ed25519Blob(publicKey));
}

function ed25519Blob(publicKey: Uint8Array): Buffer {
  return Buffer.concat([wireString(ED25519), wireString(publicKey)]);
}

export function wireString(data: string | Uint8Array): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
  return Buffer.concat([uint32(bytes.length), bytes]);
}

function uint32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value);
  return out;
}

function uint64(value: bigint): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(value);
  return out;
}

class WireReader {
  private offset = 0;
  constructor(private readonly data: Buffer) {}

  /** The next SSH wire string's bytes. */
  string(): Buffer {
    const start = this.offset + 4;
    return this.data.subarray(start, this.skipString());
  }

  /** Moves past one string; returns the offset after it. */
  skipString(): number {
    if (this.offset + 4 > this.data.length) throw new Error('truncated');
    const length = this.data.readUInt32BE(this.offset);
    if (this.offset + 4 + length > this.data.length) throw new Error('truncated');
    this.offset += 4 + length;
    return this.offset;
  }

  remaining(): number {
    return this.data.length - this.offset;
  }
}
