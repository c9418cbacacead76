/**
 * The join service's inputs, as files in one directory on a control-plane node (written at init, and onto
 * every control-plane node that joins), and the watcher that reloads them while the service runs:
 *
 *   attestation-config.json  {"variant", "config": VariantConfig, "previous"?: [VariantConfig]}
 *   master-secret.json       {"key": base64, "salt": base64} (the workspace's format)
 *   measurement-salt         hex, 32 bytes
 *   cluster.json             {"apiServerEndpoint": "host:port", "kubernetesVersion": "v1.x.y"}
 *   pki/<kubeadm names>      ca.crt, ca.key, front-proxy-ca.*, etcd/ca.*, sa.key, sa.pub
 *
 * `previous` lists measurements that stay accepted during an upgrade (DESIGN §10). The watcher checks the
 * files' identity (inode, size, mtime) on every request, sharing one check among concurrent requests, so a
 * change counts from the next request on, without a restart; a broken or half-written set keeps the last
 * good configuration and logs a warning, never taking the service down.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { VariantConfig } from '../lib/attestation/types.js';
import { UserError } from '../lib/errors.js';
import { MEASUREMENT_SALT_LENGTH, type MasterSecret } from '../lib/kms/index.js';
import type { Logger } from '../lib/logging/index.js';
import { loadClusterPki, PKI_FILE_NAMES, type ClusterPki, type PkiFiles } from '../lib/pki/cluster-pki.js';
import { writeFileAtomic } from '../lib/workspace/atomic-file.js';
import { masterSecretToJson, parseMasterSecret } from '../lib/workspace/master-secret.js';
import { readRequiredFile } from '../lib/workspace/required-file.js';
import type { ControlPlaneFile } from '../proto/gen/constellation/join.js';

export const SERVICE_FILES = {
  attestationConfig: 'attestation-config.json',
  masterSecret: 'master-secret.json',
  measurementSalt: 'measurement-salt',
  cluster: 'cluster.json',
  pkiDir: 'pki',
} as const;

/** Every file of the directory, relative to it. */
export const SERVICE_FILE_PATHS: readonly string[] = [
  SERVICE_FILES.attestationConfig,
  SERVICE_FILES.masterSecret,
  SERVICE_FILES.measurementSalt,
  SERVICE_FILES.cluster,
  ...PKI_FILE_NAMES.map((name) => `${SERVICE_FILES.pkiDir}/${name}`),
];

/** Prefix of the join service's own files among a control-plane ticket's files (the PKI goes by kubeadm's names). */
export const CONTROL_PLANE_SERVICE_PREFIX = 'joinservice/';

export interface AttestationConfigFile {
  variant: string;
  config: VariantConfig;
  /** Measurements still accepted while an upgrade rolls out. */
  previous?: VariantConfig[];
}

export interface ClusterInfo {
  /** host:port of the Kubernetes API server (the control-plane load balancer). */
  apiServerEndpoint: string;
  kubernetesVersion: string;
}

/** What the directory holds, decoded. */
export interface ServiceFileContents {
  attestation: AttestationConfigFile;
  masterSecret: MasterSecret;
  measurementSalt: Uint8Array;
  cluster: ClusterInfo;
  pki: PkiFiles;
}

/** A loaded, checked configuration. `generation` grows by one with each reload. */
export interface ServiceConfig {
  generation: number;
  attestation: AttestationConfigFile;
  masterSecret: MasterSecret;
  measurementSalt: Uint8Array;
  cluster: ClusterInfo;
  pki: ClusterPki;
  /** Every file's bytes by its path in the directory (what control-plane nodes receive). */
  raw: ReadonlyMap<string, Buffer>;
}

const measurementsSchema = z.record(
  z.string().regex(/^([0-9]|1[0-9]|2[0-3])$/, 'a PCR index is 0 to 23'),
  z.object({ expected: z.string().regex(/^([0-9a-f]{2})+$/i, 'expected must be hex'), warnOnly: z.boolean() }).strict(),
);
const variantConfigSchema = z.looseObject({ measurements: measurementsSchema });
const attestationConfigSchema = z.object({ variant: z.string().min(1), config: variantConfigSchema, previous: z.array(variantConfigSchema).optional() }).strict();
const clusterSchema = z.object({
  apiServerEndpoint: z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port'),
  kubernetesVersion: z.string().min(1),
}).strict();

/** Writes the directory's files (each atomically, mode 0600); existing files are replaced. */
export async function writeServiceFiles(dir: string, contents: ServiceFileContents): Promise<void> {
  await writeRawServiceFiles(dir, encodeServiceFiles(contents));
}

/** Writes files by their path in the directory (e.g. the files a control-plane ticket carried, see below). */
export async function writeRawServiceFiles(dir: string, files: ReadonlyMap<string, Uint8Array | string>): Promise<void> {
  for (const [name, data] of files) {
    if (!SERVICE_FILE_PATHS.includes(name)) throw new UserError(`"${name}" is not a join service file.`);
    await writeFileAtomic(path.join(dir, name), data, { mode: 0o600 });
  }
}

export function encodeServiceFiles(contents: ServiceFileContents): Map<string, string> {
  const files = new Map<string, string>([
    [SERVICE_FILES.attestationConfig, `${JSON.stringify(contents.attestation, null, 2)}\n`],
    [SERVICE_FILES.masterSecret, masterSecretToJson(contents.masterSecret)],
    [SERVICE_FILES.measurementSalt, `${Buffer.from(contents.measurementSalt).toString('hex')}\n`],
    [SERVICE_FILES.cluster, `${JSON.stringify(contents.cluster, null, 2)}\n`],
  ]);
  for (const name of PKI_FILE_NAMES) files.set(`${SERVICE_FILES.pkiDir}/${name}`, contents.pki[name]);
  return files;
}

/**
 * The files a joining control-plane node receives: the PKI by kubeadm's names (for /etc/kubernetes/pki) and
 * the join service's other files under "joinservice/", so that node can run a join service too.
 */
export function controlPlaneFiles(config: ServiceConfig): ControlPlaneFile[] {
  return [...config.raw].map(([name, data]) => ({
    name: name.startsWith(`${SERVICE_FILES.pkiDir}/`) ? name.slice(SERVICE_FILES.pkiDir.length + 1) : `${CONTROL_PLANE_SERVICE_PREFIX}${name}`,
    data,
  }));
}

/** The inverse of controlPlaneFiles: the join service directory's files by path (for writeRawServiceFiles). */
export function serviceFilesFromControlPlaneFiles(files: readonly ControlPlaneFile[]): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const file of files) {
    const name = file.name.startsWith(CONTROL_PLANE_SERVICE_PREFIX)
      ? file.name.slice(CONTROL_PLANE_SERVICE_PREFIX.length)
      : `${SERVICE_FILES.pkiDir}/${file.name}`;
    if (SERVICE_FILE_PATHS.includes(name)) out.set(name, file.data);
  }
  return out;
}

/** Reads and checks the whole directory. Throws a UserError naming the file that is missing or wrong. */
export async function readServiceFiles(dir: string, generation = 1): Promise<ServiceConfig> {
  const raw = new Map<string, Buffer>();
  const hint = `The join service directory holds ${SERVICE_FILE_PATHS.join(', ')}.`;
  await Promise.all(SERVICE_FILE_PATHS.map(async (name) => raw.set(name, await readRequiredFile(path.join(dir, name), 'the join service file', hint))));
  const text = (name: string) => raw.get(name)!.toString('utf8');
  const where = (name: string) => path.join(dir, name);

  const attestation = parseJson(text(SERVICE_FILES.attestationConfig), attestationConfigSchema, where(SERVICE_FILES.attestationConfig)) as AttestationConfigFile;
  const masterSecret = parseMasterSecret(text(SERVICE_FILES.masterSecret), where(SERVICE_FILES.masterSecret));
  const saltHex = text(SERVICE_FILES.measurementSalt).trim();
  if (!new RegExp(`^[0-9a-fA-F]{${MEASUREMENT_SALT_LENGTH * 2}}$`).test(saltHex)) {
    // The salt is not secret on its own, but the message still does not quote it.
    throw new UserError(`${where(SERVICE_FILES.measurementSalt)} must hold ${MEASUREMENT_SALT_LENGTH} bytes as hex.`);
  }
  const cluster = parseJson(text(SERVICE_FILES.cluster), clusterSchema, where(SERVICE_FILES.cluster));
  const pkiFiles = Object.fromEntries(PKI_FILE_NAMES.map((name) => [name, raw.get(`${SERVICE_FILES.pkiDir}/${name}`)!]));
  const pki = loadClusterPki(pkiFiles, where(SERVICE_FILES.pkiDir));
  return { generation, attestation, masterSecret, measurementSalt: new Uint8Array(Buffer.from(saltHex, 'hex')), cluster, pki, raw };
}

export interface ServiceFilesWatcherOptions {
  logger: Logger;
  /** Further checks of a loaded configuration (e.g. building its validator); throwing rejects it like a malformed file. */
  accept?: (config: ServiceConfig) => Promise<void>;
}

/** Keeps the last good configuration of a directory and reloads it when its files change. */
export class ServiceFilesWatcher {
  private config: ServiceConfig | undefined;
  private identity = '';
  private rejected = '';
  private checking: Promise<ServiceConfig> | undefined;

  constructor(
    readonly dir: string,
    private readonly options: ServiceFilesWatcherOptions,
  ) {}

  /** Loads the directory the first time; a UserError when it is not a complete, valid configuration. */
  async start(): Promise<ServiceConfig> {
    // A file missing here is named by load(); an unreadable identity only means the next request reloads.
    const identity = await this.readIdentity().catch(() => '');
    this.config = await this.load(1);
    this.identity = identity;
    return this.config;
  }

  /** The configuration to use for a request that starts now. Never throws once start() succeeded. */
  current(): Promise<ServiceConfig> {
    if (!this.config) throw new Error('ServiceFilesWatcher.current() before start()');
    this.checking ??= this.check().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async check(): Promise<ServiceConfig> {
    const last = this.config!;
    let identity: string;
    try {
      identity = await this.readIdentity();
    } catch (err) {
      return this.keep(last, 'missing', err);
    }
    if (identity === this.identity || identity === this.rejected) return last;
    try {
      this.config = await this.load(last.generation + 1);
      this.identity = identity;
      this.rejected = '';
      this.options.logger.info('join service files reloaded', { dir: this.dir, generation: this.config.generation, variant: this.config.attestation.variant });
      return this.config;
    } catch (err) {
      return this.keep(last, identity, err);
    }
  }

  private async load(generation: number): Promise<ServiceConfig> {
    const config = await readServiceFiles(this.dir, generation);
    await this.options.accept?.(config);
    return config;
  }

  /** Logs (once per broken state of the files) that the last good configuration stays in use. */
  private keep(last: ServiceConfig, identity: string, err: unknown): ServiceConfig {
    if (identity !== this.rejected) {
      this.rejected = identity;
      this.options.logger.warn('join service files are invalid; keeping the last good configuration', {
        dir: this.dir,
        generation: last.generation,
        reason: err instanceof UserError ? err.message : String((err as Error)?.message ?? err),
      });
    }
    return last;
  }

  /** inode, size and mtime of every file: a rename-into-place or an in-place write changes it. */
  private async readIdentity(): Promise<string> {
    const stats = await Promise.all(SERVICE_FILE_PATHS.map((name) => fs.stat(path.join(this.dir, name), { bigint: true })));
    return stats.map((s) => `${s.ino}:${s.size}:${s.mtimeNs}`).join(',');
  }
}

function parseJson<T>(text: string, schema: z.ZodType<T>, file: string): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UserError(`${file} is not valid JSON.`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UserError(`${file}: ${issue.path.join('.') || '(top level)'}: ${issue.message}.`);
  }
  return parsed.data;
}
