/**
 * Key material and derivations of docs/design.md#keys-and-identities, byte-exact with Constellation: the master secret, the
 * HKDF-SHA256 derivations of state-disk keys, the measurement secret and the clusterID, and the PCR 15
 * value a node shows once it has been initialized or has joined with that clusterID.
 * Everything here is pure (randomness is a parameter) so the join service, the bootstrapper and the CLI
 * derive the same values and tests pin them with the shared vectors.
 */
import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { UserError } from '../errors.js';

/** The cluster's root secret: kept in constellation-mastersecret.json and sent (sealed) to the first node. */
export interface MasterSecret {
  key: Uint8Array;
  salt: Uint8Array;
}

export type RandomSource = (size: number) => Uint8Array;

export const MASTER_KEY_LENGTH = 32;
export const MASTER_SALT_LENGTH = 32;
/** Shorter keys or salts in a master-secret file are refused (Constellation's limits). */
export const MIN_MASTER_KEY_LENGTH = 16;
export const MIN_MASTER_SALT_LENGTH = 32;
export const STATE_DISK_KEY_LENGTH = 32;
export const MEASUREMENT_SECRET_LENGTH = 32;
export const MEASUREMENT_SALT_LENGTH = 32;
export const CLUSTER_ID_LENGTH = 32;

/** Prefix of every HKDF info string (Constellation's crypto.DEKPrefix). */
const INFO_PREFIX = 'key-';
const MEASUREMENT_SECRET_INFO = `${INFO_PREFIX}measurementSecret`;
const CLUSTER_ID_INFO = `${INFO_PREFIX}clusterID`;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function generateMasterSecret(random: RandomSource = randomBytes): MasterSecret {
  return { key: copy(random(MASTER_KEY_LENGTH)), salt: copy(random(MASTER_SALT_LENGTH)) };
}

/** The measurement salt the CLI makes at init and keeps in the state file (clusterValues.measurementSalt). */
export function generateMeasurementSalt(random: RandomSource = randomBytes): Uint8Array {
  return copy(random(MEASUREMENT_SALT_LENGTH));
}

/** HKDF-SHA256 (RFC 5869). An empty salt means HKDF's default: hash-length zero bytes. */
export function hkdfSha256(
  secret: Uint8Array,
  salt: Uint8Array,
  info: string | Uint8Array,
  length: number,
): Uint8Array {
  const infoBytes = typeof info === 'string' ? Buffer.from(info, 'utf8') : info;
  return new Uint8Array(hkdfSync('sha256', secret, salt, infoBytes, length));
}

/**
 * The key of one node's state disk: HKDF(masterKey, masterSalt, "key-" + lowercase(diskUUID), 32).
 * Only UUIDs are accepted, so no request can ask for another derivation's output (e.g. "measurementSecret").
 */
export function deriveStateDiskKey(master: MasterSecret, diskUUID: string): Uint8Array {
  const uuid = diskUUID.toLowerCase();
  if (!UUID_PATTERN.test(uuid)) {
    throw new UserError(`"${diskUUID}" is not a disk UUID.`, {
      hint: 'A state-disk UUID has the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex digits).',
    });
  }
  return hkdfSha256(master.key, master.salt, `${INFO_PREFIX}${uuid}`, STATE_DISK_KEY_LENGTH);
}

/** HKDF(masterKey, masterSalt, "key-measurementSecret", 32). */
export function deriveMeasurementSecret(master: MasterSecret): Uint8Array {
  return hkdfSha256(master.key, master.salt, MEASUREMENT_SECRET_INFO, MEASUREMENT_SECRET_LENGTH);
}

/** HKDF(measurementSecret, measurementSalt, "key-clusterID", 32). */
export function deriveClusterId(measurementSecret: Uint8Array, measurementSalt: Uint8Array): Uint8Array {
  return hkdfSha256(measurementSecret, measurementSalt, CLUSTER_ID_INFO, CLUSTER_ID_LENGTH);
}

/** PCR 15 after one extend with the clusterID from reset (all zero): SHA-256(0^32 ‖ SHA-256(clusterID)). */
export function expectedPcr15(clusterId: Uint8Array): Uint8Array {
  const digest = createHash('sha256').update(clusterId).digest();
  return new Uint8Array(createHash('sha256').update(Buffer.alloc(32)).update(digest).digest());
}

function copy(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
