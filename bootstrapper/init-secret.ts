/**
 * The init secret's check (docs/bootstrapper.md): a node holds only its bcrypt hash, from its provider's metadata,
 * and only until the cluster is initialized (the provider then removes it, docs/join-service.md). The init server
 * checks the secret the CLI sent, and derives the join-service identity key from it (lib/kms/join-service-key.ts);
 * the secret itself goes nowhere else.
 */
import bcrypt from 'bcryptjs';

/** Whether `initSecret` is the secret behind `hash`. */
export async function initSecretMatches(initSecret: Uint8Array, hash: string): Promise<boolean> {
  return (await initSecretPassword(initSecret, hash)) !== undefined;
}

/**
 * The password form of `initSecret` that `hash` was made from, or undefined when it is not the secret behind it (or
 * the hash is empty: the cluster is initialized). The CLI hashes its hex form; a secret that is text is compared as
 * it is too.
 */
export async function initSecretPassword(initSecret: Uint8Array, hash: string): Promise<string | undefined> {
  if (initSecret.length === 0 || hash === '') return undefined;
  const candidates = [Buffer.from(initSecret).toString('hex')];
  const text = asText(initSecret);
  if (text !== undefined) candidates.unshift(text);
  for (const candidate of candidates) {
    if (await bcrypt.compare(candidate, hash)) return candidate;
  }
  return undefined;
}

/** The bytes as text, when they are printable UTF-8 (an init secret sent as its hex or base64 string). */
function asText(bytes: Uint8Array): string | undefined {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return /^[\x21-\x7e]+$/.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}
