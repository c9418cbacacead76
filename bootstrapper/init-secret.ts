/**
 * The init secret's check (DESIGN §4): a node holds only its bcrypt hash, from its provider's metadata. The init
 * server checks the secret the CLI sent; the join client checks the one a ticket carries, so that a node uses a
 * ticket only from a genuine join service of its cluster (an impostor on the join service's address cannot know it).
 */
import bcrypt from 'bcryptjs';

/** Whether `initSecret` is the secret behind `hash`. The CLI hashes its hex form; a secret that is text is compared as it is too. */
export async function initSecretMatches(initSecret: Uint8Array, hash: string): Promise<boolean> {
  if (initSecret.length === 0 || hash === '') return false;
  const candidates = [Buffer.from(initSecret).toString('hex')];
  const text = asText(initSecret);
  if (text !== undefined) candidates.unshift(text);
  for (const candidate of candidates) {
    if (await bcrypt.compare(candidate, hash)) return true;
  }
  return false;
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
