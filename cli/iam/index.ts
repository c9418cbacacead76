/**
 * `iam create <cloud>` / `iam destroy` (docs/design.md#providers, issue 5): the identities the nodes need, made by the provider's
 * IamProvisioner (AWS instance profiles and policies; Azure user-assigned identity and role assignments; GCP service
 * accounts, custom role and key). This module runs the provider with the IAM view of the workspace journal (so
 * destroy deletes only identities, never the cluster), writes the files the provider returns into the workspace
 * (0600, never overwriting), and with --update-config sets the returned keys in constellation-conf.yaml, keeping
 * the user's comments. Everything is checked that can be checked before the cloud is asked to make anything.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type {
  IamPermissionChange,
  IamProvisioner,
  ProviderContext,
  ProviderLogger,
  ProviderModule,
  RecordedResource,
  ResourceJournal,
} from '../../providers/contract.js';
import { UserError } from '../../lib/errors.js';
import { FileExistsError, writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { iamJournalView, providerOfRecord } from '../../lib/workspace/journal-views.js';

export { iamJournalView, isIamRecord, IAM_MARK } from '../../lib/workspace/journal-views.js';
export {
  IAM_CLOUD_FLAGS,
  IAM_CLOUDS,
  iamFlagInputs,
  regionOfZone,
  resolveIamInputs,
  type IamCloud,
  type IamInputs,
} from './inputs.js';

/**
 * Files a provider's `iam create` returns, known in advance so that a run refuses before it makes (or replaces)
 * anything: GCP returns a new service-account key each run (providers/gcp/iam.ts KEY_FILE) and deletes the one an
 * earlier run made, so an existing key file must stop the run, not be found only when the new key cannot be written.
 */
const KNOWN_IAM_FILES: Record<string, readonly string[]> = { gcp: ['gcpServiceAccountKey.json'] };

export type LoadProvider = (name: string) => Promise<ProviderModule>;

export interface IamRunOptions {
  workspaceDir: string;
  /** The workspace's resource journal (FileResourceJournal); IAM records are kept apart through a view. */
  journal: ResourceJournal;
  log: ProviderLogger;
  progress?: (message: string) => void;
  signal?: AbortSignal;
  /** Options of the provider's iam() (endpoints, credentials, retry delays: tests and benches). */
  providerOptions?: Record<string, unknown>;
  /** How a provider is loaded; providers/registry.ts by default. */
  loadProvider?: LoadProvider;
}

export interface CreateIamOptions extends IamRunOptions {
  provider: string;
  /** Name prefix of every identity made. */
  prefix: string;
  /** The provider's inputs (region, subscription, project, ...): see resolveIamInputs. */
  providerConfig: Record<string, unknown>;
  /** Set the returned keys (and `alsoInConfig`) under provider.<name> in constellation-conf.yaml. */
  updateConfig: boolean;
  /** Further keys for the config with updateConfig: the inputs the user gave (region, zone, ...). */
  alsoInConfig?: Record<string, unknown>;
}

export interface IamIdentity {
  kind: string;
  id: string;
  name?: string;
}

export interface CreateIamResult {
  provider: string;
  prefix: string;
  /** The keys for provider.<name> in the config (written there when configUpdated). */
  configUpdates: Record<string, unknown>;
  configUpdated: boolean;
  /** Absolute paths of the files written into the workspace. */
  files: string[];
  /** What the workspace now records as made by `iam create`. */
  identities: IamIdentity[];
}

export async function createIam(o: CreateIamOptions): Promise<CreateIamResult> {
  if (o.updateConfig) await checkConfigForUpdate(o.workspaceDir, o.provider);
  for (const name of KNOWN_IAM_FILES[o.provider] ?? []) await refuseExisting(path.join(o.workspaceDir, name));

  const iam = await provisioner(o, o.provider);
  const ctx = providerContext(o);
  o.log.info('iam create: starting', { provider: o.provider, prefix: o.prefix });
  const result = await iam.create({ prefix: o.prefix, providerConfig: o.providerConfig }, ctx);

  const files = await writeIamFiles(o.workspaceDir, result.files ?? []);
  const configUpdates = { ...o.alsoInConfig, ...result.configUpdates };
  if (o.updateConfig) {
    const { updateConfigProviderFields } = await import('../../lib/config/index.js');
    await updateConfigProviderFields(o.workspaceDir, configUpdates);
  }
  o.log.info('iam create: done', { provider: o.provider, configKeys: Object.keys(configUpdates), files: files.length });
  return {
    provider: o.provider,
    prefix: o.prefix,
    configUpdates,
    configUpdated: o.updateConfig,
    files,
    identities: identities(await ctx.journal.list()),
  };
}

/** What `iam create` made and the workspace still records (what `iam destroy` would delete). */
export async function listIamIdentities(journal: ResourceJournal): Promise<IamIdentity[]> {
  return identities(await iamJournalView(journal).list());
}

export interface DestroyIamResult {
  /** Providers whose identities were deleted. */
  providers: string[];
  destroyed: IamIdentity[];
}

/** Deletes every identity the workspace records as made by `iam create`, provider by provider. */
export async function destroyIam(o: IamRunOptions): Promise<DestroyIamResult> {
  const ctx = providerContext(o);
  const before = await ctx.journal.list();
  const providers = [...new Set(before.map(providerOfRecord))];
  for (const name of providers) {
    o.log.info('iam destroy: starting', {
      provider: name,
      identities: before.filter((r) => providerOfRecord(r) === name).length,
    });
    await (await provisioner(o, name)).destroy(ctx);
  }
  const left = new Set((await ctx.journal.list()).map((r) => r.id));
  if (left.size > 0) {
    // A provider skipped records it does not know: say so instead of reporting success.
    throw new UserError(`iam destroy left ${left.size} recorded identities that their provider did not delete.`, {
      hint: 'Run `constellation iam destroy --debug` again; if they stay, delete them in the cloud console and remove them from constellation-resources.json.',
    });
  }
  return { providers, destroyed: identities(before) };
}

export interface UpgradeIamResult {
  /** Providers whose identities the workspace records. */
  providers: string[];
  /** Each identity whose permissions differ from what this CLI needs (before the update, when applied). */
  changes: (IamPermissionChange & { provider: string })[];
  applied: boolean;
}

/**
 * `iam upgrade apply` (upstream: cli/internal/cmd/iamupgradeapply.go): the permissions the identities `iam create`
 * made (as the workspace records them) have, against what this CLI's nodes need. Without `apply` only the plan;
 * with it each provider updates what differs. The command shows the plan and asks in between.
 */
export async function upgradeIam(o: IamRunOptions & { apply: boolean }): Promise<UpgradeIamResult> {
  const ctx = providerContext(o);
  const providers = [...new Set((await ctx.journal.list()).map(providerOfRecord))];
  const changes: UpgradeIamResult['changes'] = [];
  for (const name of providers) {
    o.log.info(`iam upgrade: ${o.apply ? 'applying' : 'planning'}`, { provider: name });
    for (const change of await (await provisioner(o, name)).upgrade(ctx, { apply: o.apply }))
      changes.push({ provider: name, ...change });
  }
  return { providers, changes, applied: o.apply && changes.length > 0 };
}

function providerContext(o: IamRunOptions): ProviderContext {
  return {
    journal: iamJournalView(o.journal),
    log: o.log,
    progress: o.progress,
    signal: o.signal,
    workspaceDir: o.workspaceDir,
  };
}

async function provisioner(o: IamRunOptions, name: string): Promise<IamProvisioner> {
  const load = o.loadProvider ?? (async (n: string) => (await import('../../providers/registry.js')).loadProvider(n));
  const module = await load(name);
  if (!module.iam) {
    throw new UserError(`The ${name} provider makes no cloud identities.`, {
      hint: '`iam create` is for the clouds: aws, azure, gcp.',
    });
  }
  return module.iam(o.providerOptions ?? {});
}

function identities(records: RecordedResource[]): IamIdentity[] {
  return records.map((r) => ({ kind: r.kind, id: r.id, ...(r.name ? { name: r.name } : {}) }));
}

/** --update-config needs the workspace's config, for the same cloud; checked before anything is made. */
async function checkConfigForUpdate(workspaceDir: string, provider: string): Promise<void> {
  const { loadConfig, providerOf } = await import('../../lib/config/index.js');
  const config = await loadConfig(workspaceDir, { allowIncomplete: true });
  const configProvider = providerOf(config);
  if (configProvider !== provider) {
    throw new UserError(`--update-config: ${CONFIG_FILE} is for ${configProvider}, not ${provider}.`, {
      hint: `Run \`constellation iam create ${configProvider}\`, or use a workspace whose config is for ${provider} (\`constellation config generate ${provider}\`).`,
    });
  }
}

async function refuseExisting(file: string): Promise<void> {
  const exists = await fs.access(file).then(
    () => true,
    () => false,
  );
  if (exists) throw new FileExistsError(file);
}

/**
 * Writes the provider's files (0600). Nothing is overwritten: a file that exists with other content stops the
 * write of all of them (checked first, so none is half done); one with the same content is left as it is.
 */
async function writeIamFiles(workspaceDir: string, files: { name: string; content: string }[]): Promise<string[]> {
  const targets = files.map((f) => {
    if (path.basename(f.name) !== f.name || f.name.startsWith('.'))
      throw new Error(`provider returned an IAM file with an unsafe name: ${f.name}`);
    return { file: path.join(workspaceDir, f.name), content: f.content };
  });
  const pending: typeof targets = [];
  for (const t of targets) {
    const existing = await readRegularFile(t.file, { what: 'the IAM file', maxBytes: SIZE_LIMITS.nodeFile }).then(
      (bytes) => bytes.toString('utf8'),
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      },
    );
    if (existing === undefined) pending.push(t);
    else if (existing !== t.content) {
      throw new UserError(`${t.file} already exists: iam create does not overwrite it, so it was not written.`, {
        hint: 'The identities are made and recorded. Move the file away and run the same command again to write it, or delete the identities with `constellation iam destroy`.',
        cause: new FileExistsError(t.file),
      });
    }
  }
  for (const t of pending) await writeFileAtomic(t.file, t.content, { exclusive: true, mode: 0o600 });
  return targets.map((t) => t.file);
}
