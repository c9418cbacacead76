/**
 * A signing key kept in a folder of the user's: `<name>.pem` (PKCS#8 private key, mode 0600) and `<name>.pub`
 * (SubjectPublicKeyInfo PEM, as cosign.pub, for verifiers and for `cosign verify-blob --key`). Made on first use.
 * The private key is written exclusively (link(2)), so two processes making it at once end up with one key: the
 * loser reads the winner's. The private key never appears in a message.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic, FileExistsError } from '../workspace/atomic-file.js';
import { generateSigningKeyPair, privateKeyFromPem, trustedKeyFromPem, type TrustedKey } from '../signing-keys.js';

export interface SigningKeyFiles {
  privateKeyFile: string;
  publicKeyFile: string;
}

export function signingKeyFiles(dir: string, name: string): SigningKeyFiles {
  return { privateKeyFile: path.join(dir, `${name}.pem`), publicKeyFile: path.join(dir, `${name}.pub`) };
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The private key, made (with its public key file) when there is none yet. */
export async function loadOrCreateSigningKey(
  files: SigningKeyFiles,
): Promise<{ privateKey: KeyObject; created: boolean }> {
  let pem = await readIfExists(files.privateKeyFile);
  let created = false;
  if (pem === undefined) {
    await fs.mkdir(path.dirname(files.privateKeyFile), { recursive: true, mode: 0o700 });
    const pair = generateSigningKeyPair();
    try {
      await writeFileAtomic(files.privateKeyFile, pair.privateKeyPem, { exclusive: true, mode: 0o600 });
      pem = pair.privateKeyPem;
      created = true;
    } catch (err) {
      if (!(err instanceof FileExistsError)) throw err;
      pem = await fs.readFile(files.privateKeyFile, 'utf8');
    }
  }
  const privateKey = privateKeyFromPem(pem, files.privateKeyFile);
  const publicKeyPem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }) as string;
  // The public key file follows the private key (written again if it is missing or stale).
  if ((await readIfExists(files.publicKeyFile)) !== publicKeyPem)
    await writeFileAtomic(files.publicKeyFile, publicKeyPem, { mode: 0o644 });
  return { privateKey, created };
}

/** The public key file as a trusted key, or undefined when no key was made yet. */
export async function readPublicKeyFile(files: SigningKeyFiles, name: string): Promise<TrustedKey | undefined> {
  const pem = await readIfExists(files.publicKeyFile);
  return pem === undefined ? undefined : trustedKeyFromPem(pem, name);
}
