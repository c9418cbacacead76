/**
 * Removes secrets from values before they are logged: the values of secret-looking keys (key, salt,
 * masterSecret, initSecret, token, password, privateKey, jwe, ...; any case) and byte arrays longer than
 * 16 bytes (keys, nonces and sealed blobs look alike) become "[redacted]", recursively. PEM private keys
 * inside strings are cut out too. The input is never changed; a new value is returned.
 */
export const REDACTED = '[redacted]';

/** Byte arrays up to this length (ids, short digests, ports) are kept. */
const MAX_PLAIN_BYTES = 16;

/** Secret keys (lowercase, without '-' and '_') that the part and suffix rules below do not catch. */
const SECRET_KEYS = new Set(['passwd', 'authorization', 'cookie', 'kubeconfig', 'adminconf', 'sealed']);

/** Parts of key names that mark a secret wherever they appear (accessToken, initSecretHex, ...). */
const SECRET_PARTS = ['secret', 'password', 'passphrase', 'privatekey', 'token', 'credential'];
/** Suffixes that mark a secret (stateDiskKey, apiKey, measurementSalt), unless the key is a public one. */
const SECRET_SUFFIXES = ['key', 'salt', 'jwe'];
const PUBLIC_SUFFIXES = ['publickey', 'pubkey'];

const PEM_PRIVATE_KEY = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g;

export function isSecretKey(name: string): boolean {
  const k = name.toLowerCase().replace(/[-_]/g, '');
  if (SECRET_KEYS.has(k)) return true;
  if (SECRET_PARTS.some((part) => k.includes(part))) return true;
  if (PUBLIC_SUFFIXES.some((suffix) => k.endsWith(suffix))) return false;
  return SECRET_SUFFIXES.some((suffix) => k.endsWith(suffix));
}

export function redact(value: unknown): unknown {
  return redactValue(value, new WeakSet());
}

function redactValue(value: unknown, seen: WeakSet<object>): unknown {
  if (typeof value === 'string')
    return value.includes('PRIVATE KEY-----') ? value.replace(PEM_PRIVATE_KEY, REDACTED) : value;
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof ArrayBuffer)
    return value.byteLength > MAX_PLAIN_BYTES ? REDACTED : new Uint8Array(value.slice(0));
  if (ArrayBuffer.isView(value)) {
    if (value.byteLength > MAX_PLAIN_BYTES) return REDACTED;
    return new Uint8Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  }
  if (seen.has(value)) return '[circular]';
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => redactValue(item, seen));
    if (value instanceof Map) {
      const out = new Map<unknown, unknown>();
      for (const [k, v] of value) out.set(k, typeof k === 'string' && isSecretKey(k) ? REDACTED : redactValue(v, seen));
      return out;
    }
    if (value instanceof Set) return new Set([...value].map((item) => redactValue(item, seen)));
    if (value instanceof Date) return value;
    if (value instanceof Error) return redactError(value, seen);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = isSecretKey(k) ? REDACTED : redactValue(v, seen);
    return out;
  } finally {
    seen.delete(value);
  }
}

/** Errors become plain objects: name, message, code and cause survive JSON, the rest of an Error does not. */
function redactError(err: Error, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = { name: err.name, message: redactValue(err.message, seen) };
  for (const [k, v] of Object.entries(err)) out[k] = isSecretKey(k) ? REDACTED : redactValue(v, seen);
  if (err.cause !== undefined) out.cause = redactValue(err.cause, seen);
  if (err.stack) out.stack = redactValue(err.stack, seen);
  return out;
}
