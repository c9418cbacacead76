/**
 * A node's SSH host key (docs/workflows/emergency-ssh.md): an Ed25519 key the node program makes itself, the first
 * time it enters a cluster, and keeps on its encrypted state disk beside the host certificate the cluster's
 * emergency SSH CA gave it (./certificate.ts signHostCertificate), so a rebooted node presents the same key and
 * certificate. No image carries a host key: every node's is its own.
 *
 * The private key is written in OpenSSH's own format ("openssh-key-v1", PROTOCOL.key in OpenSSH's sources,
 * unencrypted), which every sshd reads; node:crypto makes the key but writes only PKCS#8, which OpenSSH 9.2 does not
 * read for Ed25519. The tests check the file with `ssh-keygen -y`.
 */
import { randomBytes } from 'node:crypto';
import { ed25519KeyFromSeed, ed25519PublicKeyBlob, wireString, type ParsedPublicKey } from './certificate.js';

export interface SshHostKey {
  /** The private key file's text (OpenSSH format). Secret: written only to the state disk, never logged. */
  privateKeyFile: string;
  /** The public key (SSH wire encoding, type "ssh-ed25519"). */
  publicKey: ParsedPublicKey;
}

/** An Ed25519 private key is its 32-byte seed (RFC 8032), which OpenSSH's format stores with the public key. */
const SEED_LENGTH = 32;

export function generateSshHostKey(comment = 'constellation-node'): SshHostKey {
  const seed = randomBytes(SEED_LENGTH);
  const raw = ed25519KeyFromSeed(seed).publicKey;
  const blob = ed25519PublicKeyBlob(raw);
  return {
    privateKeyFile: openSshPrivateKey(seed, raw, comment),
    publicKey: { type: 'ssh-ed25519', blob, comment },
  };
}

/** The public key's one-line form ("ssh-ed25519 AAAA… comment"), as in a .pub file. */
export function publicKeyLine(key: ParsedPublicKey): string {
  return `${key.type} ${Buffer.from(key.blob).toString('base64')}${key.comment ? ` ${key.comment}` : ''}\n`;
}

function openSshPrivateKey(seed: Uint8Array, publicKey: Uint8Array, comment: string): string {
  const check = randomBytes(4);
  const section = [
    check,
    check,
    wireString('ssh-ed25519'),
    wireString(publicKey),
    wireString(Buffer.concat([seed, publicKey])),
    wireString(comment),
  ];
  let privateSection = Buffer.concat(section);
  // Padding 1, 2, 3, … up to the cipher's block size (8 for "none").
  const pad = (8 - (privateSection.length % 8)) % 8;
  privateSection = Buffer.concat([privateSection, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0', 'latin1'),
    wireString('none'),
    wireString('none'),
    wireString(Buffer.alloc(0)),
    Buffer.from([0, 0, 0, 1]),
    wireString(ed25519PublicKeyBlob(publicKey)),
    wireString(privateSection),
  ]);
  const base64 = body.toString('base64').replace(/.{1,70}/g, '$&\n');
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${base64}-----END OPENSSH PRIVATE KEY-----\n`;
}
