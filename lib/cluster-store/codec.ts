/**
 * The cluster store's entries, the same for every backend: names (keys relative to the store's prefix) and
 * values (text), and the checks a value must pass when read. A malformed entry is a UserError naming the entry,
 * never quoting a secret.
 *
 *   join/attestation-config   {"variant", "config": VariantConfig, "previous"?: [VariantConfig]}
 *   join/cluster              {"apiServerEndpoint": "host:port", "kubernetesVersion", "imageVersion"?}
 *   join/measurement-salt     hex, 32 bytes
 *   join/master-secret        {"key": base64, "salt": base64} (the workspace's format)
 *   join/init-secret          hex
 *   join/pki/<kubeadm names>  PEM: ca.crt, ca.key, front-proxy-ca.*, etcd/ca.*, sa.key, sa.pub
 *   nodes/<name>              NodeRecord JSON
 *   disks/<uuid>              the instance that claimed the disk
 *   upgrades/kubernetes       KubernetesUpgrade JSON
 */
import { z } from 'zod';
import { incompleteMeasurements } from '../attestation/measurements.js';
import { UserError } from '../errors.js';
import { JsonInputError, parseJson as parseJsonText } from '../json.js';
import { JOIN_SERVICE_KEY_SEED_LENGTH, MEASUREMENT_SALT_LENGTH } from '../kms/index.js';
import { PKI_FILE_NAMES, type PkiFiles } from '../pki/cluster-pki.js';
import { masterSecretToJson, parseMasterSecret } from '../workspace/master-secret.js';
import { ENTRY } from './entries.js';
import {
  StoreNotInitializedError,
  type AttestationConfigRecord,
  type ClusterInfo,
  type JoinConfig,
  type KubernetesUpgrade,
  type NodeRecord,
} from './types.js';

export { ENTRY, JOIN_CONFIG_PREFIX, NODES_PREFIX } from './entries.js';

/** Every entry of a complete join configuration. */
export const JOIN_CONFIG_ENTRIES: readonly string[] = [
  ENTRY.attestationConfig,
  ENTRY.cluster,
  ENTRY.measurementSalt,
  ENTRY.masterSecret,
  ENTRY.joinServiceKey,
  ...PKI_FILE_NAMES.map((name) => ENTRY.pki(name)),
];

const measurementsSchema = z.record(
  z.string().regex(/^([0-9]|1[0-9]|2[0-3])$/, 'a PCR index is 0 to 23'),
  z.object({ expected: z.string().regex(/^([0-9a-f]{2})+$/i, 'expected must be hex'), warnOnly: z.boolean() }).strict(),
);
// An empty or partial set would make the join services check less than a node image measures: refused on write and
// on read, like a malformed one.
const variantConfigSchema = z.looseObject({
  measurements: measurementsSchema.superRefine((measurements, ctx) => {
    const reason = incompleteMeasurements(measurements);
    if (reason) ctx.addIssue({ code: 'custom', message: `incomplete measurements: ${reason}` });
  }),
});
export const attestationConfigSchema = z
  .object({
    variant: z.string().min(1),
    config: variantConfigSchema,
    previous: z.array(variantConfigSchema).optional(),
  })
  .strict();
const clusterSchema = z
  .object({
    apiServerEndpoint: z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port'),
    kubernetesVersion: z.string().min(1),
    imageVersion: z.string().min(1).optional(),
  })
  .strict();
const nodeSchema = z
  .object({
    name: z.string().min(1),
    role: z.enum(['control-plane', 'worker']),
    diskUuid: z.string(),
    joinedAt: z.string(),
    lastEntry: z.enum(['init', 'join', 'rejoin']),
    lastEntryAt: z.string(),
  })
  .strict();

const kubernetesUpgradeSchema = z
  .object({
    version: z.string().min(1),
    from: z.string().min(1),
    requestedAt: z.string(),
    first: z.string().min(1).optional(),
    applied: z.boolean().optional(),
    nodes: z.record(
      z.string(),
      z.object({ result: z.enum(['upgraded', 'failed']), reason: z.string().optional(), at: z.string() }).strict(),
    ),
  })
  .strict();

/** The entries that hold `parts` of a join configuration. */
export function encodeJoinConfig(parts: Partial<JoinConfig>): Map<string, string> {
  const out = new Map<string, string>();
  if (parts.attestation)
    out.set(ENTRY.attestationConfig, JSON.stringify(attestationConfigSchema.parse(parts.attestation)));
  if (parts.cluster) out.set(ENTRY.cluster, JSON.stringify(clusterSchema.parse(parts.cluster)));
  if (parts.measurementSalt) out.set(ENTRY.measurementSalt, Buffer.from(parts.measurementSalt).toString('hex'));
  if (parts.masterSecret) out.set(ENTRY.masterSecret, masterSecretToJson(parts.masterSecret));
  if (parts.joinServiceKey) out.set(ENTRY.joinServiceKey, Buffer.from(parts.joinServiceKey).toString('hex'));
  if (parts.pki) for (const name of PKI_FILE_NAMES) out.set(ENTRY.pki(name), parts.pki[name]);
  return out;
}

/** Reads a join configuration from its entries; `where` names the store in messages. */
export function decodeJoinConfig(entries: ReadonlyMap<string, string>, where: string): JoinConfig {
  const missing = JOIN_CONFIG_ENTRIES.filter((name) => !entries.has(name));
  if (missing.length === JOIN_CONFIG_ENTRIES.length) {
    throw new StoreNotInitializedError(
      `${where} holds no join configuration: the cluster was not initialized through it.`,
      {
        hint: 'Initialize the cluster (`constellation init`) first.',
      },
    );
  }
  if (missing.length > 0) throw new UserError(`${where} is missing ${missing.join(', ')} of the join configuration.`);
  const name = (entry: string) => `${where}: ${entry}`;
  const attestation = parseJson(
    entries.get(ENTRY.attestationConfig)!,
    attestationConfigSchema,
    name(ENTRY.attestationConfig),
  ) as AttestationConfigRecord;
  const cluster = parseJson(entries.get(ENTRY.cluster)!, clusterSchema, name(ENTRY.cluster)) as ClusterInfo;
  const saltHex = entries.get(ENTRY.measurementSalt)!.trim();
  if (!new RegExp(`^[0-9a-fA-F]{${MEASUREMENT_SALT_LENGTH * 2}}$`).test(saltHex)) {
    throw new UserError(`${name(ENTRY.measurementSalt)} must hold ${MEASUREMENT_SALT_LENGTH} bytes as hex.`);
  }
  const masterSecret = parseMasterSecret(entries.get(ENTRY.masterSecret)!, name(ENTRY.masterSecret));
  const serviceKeyHex = entries.get(ENTRY.joinServiceKey)!.trim();
  // The key is secret: the message names the entry, never its value.
  if (!new RegExp(`^[0-9a-fA-F]{${JOIN_SERVICE_KEY_SEED_LENGTH * 2}}$`).test(serviceKeyHex)) {
    throw new UserError(`${name(ENTRY.joinServiceKey)} must hold ${JOIN_SERVICE_KEY_SEED_LENGTH} bytes as hex.`);
  }
  const pki = Object.fromEntries(PKI_FILE_NAMES.map((file) => [file, entries.get(ENTRY.pki(file))!])) as PkiFiles;
  return {
    attestation,
    cluster,
    measurementSalt: new Uint8Array(Buffer.from(saltHex, 'hex')),
    masterSecret,
    joinServiceKey: new Uint8Array(Buffer.from(serviceKeyHex, 'hex')),
    pki,
  };
}

export function encodeNode(record: NodeRecord): string {
  return JSON.stringify(nodeSchema.parse(record));
}

export function decodeNode(text: string, where: string): NodeRecord {
  return parseJson(text, nodeSchema, where);
}

export function encodeKubernetesUpgrade(upgrade: KubernetesUpgrade): string {
  return JSON.stringify(kubernetesUpgradeSchema.parse(upgrade));
}

export function decodeKubernetesUpgrade(text: string, where: string): KubernetesUpgrade {
  return parseJson(text, kubernetesUpgradeSchema, where);
}

function parseJson<T>(text: string, schema: z.ZodType<T>, where: string): T {
  let value: unknown;
  try {
    value = parseJsonText(text);
  } catch (err) {
    throw new UserError(`${where} ${err instanceof JsonInputError ? err.message : 'is not valid JSON'}.`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UserError(`${where}: ${issue.path.join('.') || '(top level)'}: ${issue.message}.`);
  }
  return parsed.data;
}
