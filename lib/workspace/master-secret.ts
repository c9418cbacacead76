/**
 * constellation-mastersecret.json: `{"key": base64, "salt": base64}` (Constellation's format). Written once,
 * before the init request leaves the CLI, and never overwritten: losing it means losing every state disk.
 * Reading checks the file strictly (standard base64, key >= 16 bytes, salt >= 32 bytes) and no error
 * message ever quotes the file's content, which is the secret.
 */
import path from 'node:path';
import { UserError } from '../errors.js';
import { MIN_MASTER_KEY_LENGTH, MIN_MASTER_SALT_LENGTH, type MasterSecret } from '../kms/keys.js';
import { writeFileAtomic } from './atomic-file.js';
import { MASTER_SECRET_FILE } from './files.js';
import { SIZE_LIMITS } from './regular-file.js';
import { readRequiredFile } from './required-file.js';

export type { MasterSecret } from '../kms/keys.js';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const FORMAT_HINT = `It must be JSON of the form {"key": "<base64>", "salt": "<base64>"} with a key of at least ${MIN_MASTER_KEY_LENGTH} bytes and a salt of at least ${MIN_MASTER_SALT_LENGTH} bytes. Restore it from your backup.`;

export function masterSecretPath(workspaceDir: string): string {
  return path.join(workspaceDir, MASTER_SECRET_FILE);
}

export async function readMasterSecret(workspaceDir: string): Promise<MasterSecret> {
  const file = masterSecretPath(workspaceDir);
  const text = await readRequiredFile(
    file,
    'the master secret',
    'Run the command in the workspace of this cluster (-C <dir>), or restore the file from your backup.',
    SIZE_LIMITS.masterSecret,
  );
  return parseMasterSecret(text.toString('utf8'), file);
}

/** Parses the file's content; `file` only names it in messages. */
export function parseMasterSecret(text: string, file: string = MASTER_SECRET_FILE): MasterSecret {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the input, so it is not passed on.
    throw invalid(file, 'is not valid JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw invalid(file, 'is not a JSON object');
  const record = json as Record<string, unknown>;
  const key = decodeField(record, 'key', MIN_MASTER_KEY_LENGTH, file);
  const salt = decodeField(record, 'salt', MIN_MASTER_SALT_LENGTH, file);
  return { key, salt };
}

export function masterSecretToJson(secret: MasterSecret): string {
  checkLength(secret.key, 'key', MIN_MASTER_KEY_LENGTH, MASTER_SECRET_FILE);
  checkLength(secret.salt, 'salt', MIN_MASTER_SALT_LENGTH, MASTER_SECRET_FILE);
  const body = { key: Buffer.from(secret.key).toString('base64'), salt: Buffer.from(secret.salt).toString('base64') };
  return `${JSON.stringify(body, null, 2)}\n`;
}

/** Writes the file exclusively (FileExistsError if it exists), atomically, mode 0600. */
export async function writeMasterSecret(workspaceDir: string, secret: MasterSecret): Promise<void> {
  await writeFileAtomic(masterSecretPath(workspaceDir), masterSecretToJson(secret), {
    exclusive: true,
    mode: 0o600,
    what: 'the master secret',
  });
}

function decodeField(
  record: Record<string, unknown>,
  field: 'key' | 'salt',
  minLength: number,
  file: string,
): Uint8Array {
  const value = record[field];
  if (value === undefined) throw invalid(file, `has no "${field}"`);
  if (typeof value !== 'string') throw invalid(file, `has a "${field}" that is not a string`);
  if (!BASE64.test(value)) throw invalid(file, `has a "${field}" that is not valid base64`);
  const bytes = new Uint8Array(Buffer.from(value, 'base64'));
  checkLength(bytes, field, minLength, file);
  return bytes;
}

function checkLength(bytes: Uint8Array, field: string, minLength: number, file: string): void {
  if (bytes.length < minLength) {
    throw invalid(file, `has a "${field}" of ${bytes.length} bytes; at least ${minLength} bytes are required`);
  }
}

function invalid(file: string, what: string): UserError {
  return new UserError(`The master secret ${file} ${what}.`, { hint: FORMAT_HINT });
}
