/**
 * `constellation ssh --key <public key>` (docs/workflows/emergency-ssh.md): reads the workspace's master secret
 * and the user's SSH public key, and writes an OpenSSH user certificate for that key, signed by the cluster's
 * emergency SSH CA (./certificate.ts), beside the key as `<key>-cert.pub` (id_ed25519.pub → id_ed25519-cert.pub),
 * the name under which `ssh -i <key>` picks it up without further options. Upstream writes
 * `constellation_cert.pub` into the working directory instead; beside the key is where OpenSSH looks.
 *
 * It also writes `constellation-known-hosts` into the workspace: one `@cert-authority` line with the CA's public
 * key, which makes OpenSSH's client accept every node whose host certificate that CA signed (each node's SSH server
 * presents one: bootstrapper/emergency-ssh.ts), so `ssh -o UserKnownHostsFile=<it> -o StrictHostKeyChecking=yes`
 * connects with no prompt and refuses any other host key.
 *
 * A certificate from an earlier run is replaced (they expire after a day, so a new one is the usual reason to run
 * this). Nothing secret is written or printed: the certificate holds only public keys and the CA's signature.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.js';
import { writeFileAtomic } from '../workspace/atomic-file.js';
import { readMasterSecret } from '../workspace/master-secret.js';
import { readRequiredFile } from '../workspace/required-file.js';
import {
  deriveSshCa,
  knownHostsCaLine,
  parseSshPublicKey,
  signUserCertificate,
  sshCaPublicKeyLine,
  SSH_CERTIFICATE_PRINCIPALS,
  SSH_CERTIFICATE_VALIDITY_SECONDS,
  SSH_CLOCK_SLACK_SECONDS,
} from './certificate.js';

export interface EmergencyCertificateRequest {
  workspaceDir: string;
  /** The user's SSH public key file (an OpenSSH .pub line). */
  keyFile: string;
  /** Seconds since the epoch; defaults to now. */
  now?: number;
}

export interface EmergencyCertificate {
  /** Where the certificate was written. */
  certificateFile: string;
  keyType: string;
  principals: string[];
  validAfter: Date;
  validBefore: Date;
  /** Whether a file was there before (and is now replaced). */
  replaced: boolean;
  /** The CA's public key line (what nodes trust as TrustedUserCAKeys). */
  caPublicKey: string;
  /** The workspace's known_hosts file with the CA's `@cert-authority` line. */
  knownHostsFile: string;
}

/** The known_hosts file `constellation ssh` writes into the workspace. */
export const KNOWN_HOSTS_FILE = 'constellation-known-hosts';

/** The certificate file OpenSSH looks for beside a key: foo.pub → foo-cert.pub, foo → foo-cert.pub. */
export function certificateFileFor(keyFile: string): string {
  const base = keyFile.endsWith('.pub') ? keyFile.slice(0, -'.pub'.length) : keyFile;
  return `${base}-cert.pub`;
}

export async function writeEmergencyCertificate(request: EmergencyCertificateRequest): Promise<EmergencyCertificate> {
  const keyFile = path.resolve(request.keyFile);
  // The key first: a wrong --key is the likelier mistake, and reading it needs no secret.
  const keyText = await readRequiredFile(
    keyFile,
    'the SSH public key',
    'Pass an existing public key with --key (e.g. ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.',
    64 * 1024,
  );
  const key = parseSshPublicKey(keyText.toString('utf8'), keyFile);
  const master = await readMasterSecret(request.workspaceDir);
  const ca = deriveSshCa(master);
  const now = Math.floor(request.now ?? Date.now() / 1000);
  const validAfter = now - SSH_CLOCK_SLACK_SECONDS;
  const validBefore = now + SSH_CERTIFICATE_VALIDITY_SECONDS;
  const certificate = signUserCertificate(ca, key, {
    validAfter,
    validBefore,
    keyId: 'constellation-emergency-access',
  });
  const certificateFile = certificateFileFor(keyFile);
  const replaced = await fs.lstat(certificateFile).then(
    () => true,
    () => false,
  );
  try {
    await writeFileAtomic(certificateFile, certificate, { mode: 0o644, what: 'the SSH certificate' });
  } catch (err) {
    if (err instanceof UserError) throw err;
    throw new UserError(`Cannot write the SSH certificate ${certificateFile}: ${(err as Error).message}`, {
      hint: 'The certificate goes beside the key; make that folder writable, or copy the key to a writable folder and pass that copy with --key.',
      cause: err,
    });
  }
  const knownHostsFile = path.resolve(request.workspaceDir, KNOWN_HOSTS_FILE);
  await writeFileAtomic(knownHostsFile, knownHostsCaLine(ca.publicKey), { mode: 0o644, what: 'the known_hosts file' });
  return {
    knownHostsFile,
    certificateFile,
    keyType: key.type,
    principals: [...SSH_CERTIFICATE_PRINCIPALS],
    validAfter: new Date(validAfter * 1000),
    validBefore: new Date(validBefore * 1000),
    replaced,
    caPublicKey: sshCaPublicKeyLine(ca.publicKey).trim(),
  };
}
