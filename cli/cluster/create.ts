/**
 * `create` (docs/design.md#the-product step 2): asks the config's provider for the cluster's infrastructure and records it in the
 * state file. The uid and the init secret are made once and written to the state BEFORE the provider is called,
 * so a create killed at any point re-runs with the same ones: the provider continues what it recorded in the
 * journal, and the nodes' init-secret hash always belongs to the secret in the state. The nodes get only the bcrypt
 * hash of the init secret. Before anything is written, the config gets the measurements its nodes must show: a
 * versioned local image's signed measurements, verified with the user's image key (or the config's
 * measurementsSigningKey; an edited file is refused here, before anything starts), or, for the current build, what
 * a measuring provider reports (the local provider: PCRs 4, 9, 11 of the node image it boots).
 *
 * `createClusterWithRollBack` is what the command runs: when the provider fails half-way with an error that says
 * `canRollBack` (everything it made is in the journal), it offers the roll back: with -y it rolls back, on a
 * terminal it asks (default yes), without a terminal it leaves everything and names the commands that continue or
 * delete it. The roll back is `terminate` (./terminate.ts) with the same provider, inside the same workspace session.
 */
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcryptjs';
import type {
  CreateRequest,
  InfrastructureProvider,
  NodeGroupSpec,
  ResourceJournal,
} from '../../providers/contract.js';
import { attestationVariantOf, loadConfig, providerOf, type Config } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import { deriveJoinServiceKeySeed, joinServicePublicKey, type RandomSource } from '../../lib/kms/index.js';
import type { Logger } from '../../lib/logging/index.js';
import { emptyState, readStateOrEmpty, statePath, writeState } from '../../lib/workspace/state.js';
import { editConfig } from '../../lib/config/edit.js';
import { terminateCluster } from './terminate.js';
import { TERMINATE_HINT, workspaceArg } from './next-steps.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import type { ImageSourceOptions } from '../images/image-measurements.js';

/** 4 random bytes, hex: the cluster's uid (part of resource names and tags, like Constellation's). */
const UID_BYTES = 4;
const INIT_SECRET_BYTES = 32;
/**
 * bcrypt's least cost (2^4 rounds, about 2 ms in JavaScript): the init secret is 32 random bytes, so guessing it from
 * its hash is out of reach at any cost, and a cost only stretches guessable passwords. At cost 10 (Go's default) the
 * hash took a tenth of a second of the CLI's CPU and the check as much on the first control plane's path of init.
 * A node checks any cost a hash names (docs/bootstrapper.md).
 */
const BCRYPT_COST = 4;

export interface CreateOptions {
  workspaceDir: string;
  provider: InfrastructureProvider;
  journal: ResourceJournal;
  log: Logger;
  progress?: (message: string) => void;
  random?: RandomSource;
  signal?: AbortSignal;
  /** Where versioned images and their key are (tests: another user config folder). */
  imageSource?: ImageSourceOptions;
  /** Return once the control planes are up, the workers still starting (CreateRequest.returnWhenControlPlanesUp). */
  returnWhenControlPlanesUp?: boolean;
  /** See ProviderContext.whileControlPlanesBoot. */
  whileControlPlanesBoot?: () => void;
}

export interface CreateClusterResult {
  uid: string;
  clusterEndpoint: string;
  /** True when an interrupted create was continued (same uid and init secret). */
  resumed: boolean;
  /** The workers' start, when create returned before it ended (CreateResult.workersStarting). */
  workersStarting?: Promise<void>;
}

/**
 * The password bcrypt hashes for the nodes: the init secret as lowercase hex (64 characters, under bcrypt's
 * 72-byte limit). A node compares hex(InitSecrets.init_secret) with the hash it reads from its metadata.
 */
export function initSecretPassword(initSecret: Uint8Array): string {
  return Buffer.from(initSecret).toString('hex');
}

export async function createCluster(options: CreateOptions): Promise<CreateClusterResult> {
  const { workspaceDir, provider, log } = options;
  const random = options.random ?? randomBytes;
  let config = await loadConfig(workspaceDir);
  const providerName = providerOf(config);
  if (providerName !== provider.name)
    throw new Error(`createCluster: config is for ${providerName}, provider is ${provider.name}`);

  const state = await readStateOrEmpty(workspaceDir);
  if (state.clusterValues.clusterID) {
    throw new UserError(
      `The workspace ${workspaceDir} already has an initialized cluster (cluster ID ${state.clusterValues.clusterID}).`,
      {
        hint: 'Run `constellation terminate` to remove it first, or create the new cluster in another workspace (-C <dir>).',
      },
    );
  }

  // Before the config's measurements or the state are written.
  await provider.checkPreconditions?.();

  // The cluster's identity: the one an interrupted create persisted, else a new one (persisted below, after the
  // measurements).
  const resumed = state.infrastructure.uid !== '';
  if (resumed && !state.infrastructure.initSecret)
    throw new UserError(`The state file ${statePath(workspaceDir)} has a uid but no init secret.`, {
      hint: TERMINATE_HINT,
    });
  const uid = resumed ? state.infrastructure.uid : Buffer.from(random(UID_BYTES)).toString('hex');
  const initSecret = resumed ? state.infrastructure.initSecret : Buffer.from(random(INIT_SECRET_BYTES)).toString('hex');
  const password = initSecretPassword(Buffer.from(initSecret, 'hex'));

  if ((providerName === 'local' && config.image !== LOCAL_BUILD_IMAGE) || providerName === 'qemu') {
    options.progress?.(`verifying the signed measurements of image ${config.image}`);
    const { loadImageMeasurements } = await import('../images/image-measurements.js');
    const signed = await loadImageMeasurements(config, config.image, { baseDir: workspaceDir, ...options.imageSource });
    log.info('image measurements verified', { image: config.image, key: signed.key.fingerprint });
    config = await editConfig(workspaceDir, { measurements: signed.measurements, replaceMeasurements: true });
  } else if (provider.expectedMeasurements) {
    options.progress?.('measuring the node image');
    config = await editConfig(workspaceDir, { measurements: await provider.expectedMeasurements(workspaceDir) });
  }

  if (resumed) {
    log.info('continuing an earlier create', { uid: state.infrastructure.uid });
  } else {
    state.infrastructure = {
      ...emptyState().infrastructure,
      uid,
      initSecret,
      name: config.name,
    };
    // Persisted before anything exists, so a killed create continues with the same identity.
    await writeState(workspaceDir, state);
    log.info('new cluster identity', { uid: state.infrastructure.uid });
  }

  const initSecretHash = bcrypt.hashSync(password, BCRYPT_COST);
  // The public half of the join-service identity key: nodes check every ticket against it (docs/join-service.md).
  const joinServiceKey = Buffer.from(joinServicePublicKey(deriveJoinServiceKeySeed(password))).toString('base64');
  const request: CreateRequest = {
    uid: state.infrastructure.uid,
    name: config.name,
    image: config.image,
    kubernetesVersion: config.kubernetesVersion,
    attestationVariant: attestationVariantOf(config),
    nodeGroups: nodeGroupSpecs(config),
    initSecretHash,
    joinServiceKey,
    tags: config.tags,
    providerConfig: ((config.provider as Record<string, unknown>)[providerName] ?? {}) as Record<string, unknown>,
    ...(options.returnWhenControlPlanesUp ? { returnWhenControlPlanesUp: true } : {}),
  };
  log.info('creating infrastructure', {
    provider: providerName,
    nodeGroups: request.nodeGroups.map((g) => `${g.name}=${g.initialCount}`),
  });
  const result = await provider.create(request, {
    journal: clusterJournalView(options.journal),
    log,
    progress: options.progress,
    signal: options.signal,
    workspaceDir,
    whileControlPlanesBoot: options.whileControlPlanesBoot,
  });

  state.infrastructure = {
    ...state.infrastructure,
    clusterEndpoint: result.clusterEndpoint,
    inClusterEndpoint: result.inClusterEndpoint,
    apiServerCertSANs: result.apiServerCertSANs,
    ...(result.ipCidrNode ? { ipCidrNode: result.ipCidrNode } : {}),
    [providerName]: result.providerState,
  };
  await writeState(workspaceDir, state);
  const created = result.workersStarting
    ? 'infrastructure created; the workers are still starting'
    : 'infrastructure created';
  log.info(created, { clusterEndpoint: result.clusterEndpoint });
  return {
    uid: state.infrastructure.uid,
    clusterEndpoint: result.clusterEndpoint,
    resumed,
    ...(result.workersStarting ? { workersStarting: result.workersStarting } : {}),
  };
}

export function nodeGroupSpecs(config: Config): NodeGroupSpec[] {
  return Object.entries(config.nodeGroups).map(([name, g]) => ({
    name,
    role: g.role,
    zone: g.zone,
    instanceType: g.instanceType,
    stateDiskSizeGB: g.stateDiskSizeGB,
    stateDiskType: g.stateDiskType,
    initialCount: g.initialCount,
  }));
}

export const ROLL_BACK_QUESTION = 'Roll back: delete what was created so far?';

export interface RollBackOptions {
  /** -y: roll back without asking. */
  yes: boolean;
  /** Whether a person can answer (default: stdin and stdout are terminals). */
  interactive?: boolean;
  /** Asks a yes/no question (default: an inquirer confirmation that defaults to yes). */
  ask?: (question: string) => Promise<boolean>;
  /** Shows a line to the person running the command. */
  say: (line: string) => void;
}

/** Runs one step of the command, reporting progress lines (the CLI shows a step list); default: just runs it. */
export type StepRunner = <T>(title: string, fn: (progress: (message: string) => void) => Promise<T>) => Promise<T>;

export interface CreateWithRollBackOptions extends Omit<CreateOptions, 'progress'> {
  rollBack: RollBackOptions;
  runStep?: StepRunner;
}

/** A provider error after which everything made so far is in the journal, so terminate can delete it. */
function canRollBack(err: unknown): err is Error {
  return err instanceof Error && (err as { canRollBack?: unknown }).canRollBack === true;
}

/** createCluster, and when the provider failed half-way, the roll back (see the module header). */
export async function createClusterWithRollBack(options: CreateWithRollBackOptions): Promise<CreateClusterResult> {
  const { rollBack, workspaceDir, provider, journal, log } = options;
  const runStep: StepRunner = options.runStep ?? ((_title, fn) => fn(() => undefined));
  try {
    return await runStep(`Creating the cluster (${provider.name} provider)`, (progress) =>
      createCluster({ ...options, progress }),
    );
  } catch (err) {
    if (!canRollBack(err)) throw err;
    if (!(await decideRollBack(err.message, rollBack))) {
      const inWorkspace = workspaceArg(workspaceDir);
      rollBack.say('Not rolled back: what was created so far stays, and the workspace records it.');
      rollBack.say(`  constellation create${inWorkspace}     continues where create stopped`);
      rollBack.say(`  constellation terminate${inWorkspace}  deletes what was created`);
      log.info('create failed; not rolled back');
      throw err;
    }
    log.info('create failed; rolling back');
    try {
      await runStep('Rolling back: deleting what was created', (progress) =>
        terminateCluster({ workspaceDir, journal, log, provider, progress }),
      );
    } catch (rollBackError) {
      throw new UserError(`${err.message}\nRolling back failed too: ${(rollBackError as Error).message}`, {
        hint: 'What is not deleted yet is still recorded in the workspace: run `constellation terminate` to delete it.',
        cause: rollBackError,
      });
    }
    rollBack.say('Rolled back: everything create had made is deleted.');
    const causeHint = err.cause instanceof UserError ? err.cause.hint : undefined;
    throw new UserError(err.message, {
      hint: `${causeHint ? `${causeHint} ` : ''}Fix the cause, then run \`constellation create\` again.`,
      cause: err,
    });
  }
}

/** -y rolls back; without a person to ask, nothing is rolled back; else the person decides (default yes). */
async function decideRollBack(failure: string, o: RollBackOptions): Promise<boolean> {
  if (o.yes) return true;
  if (!(o.interactive ?? Boolean(process.stdin.isTTY && process.stdout.isTTY))) return false;
  o.say(`Create failed: ${failure}`);
  const ask =
    o.ask ?? (async (message: string) => (await import('@inquirer/prompts')).confirm({ message, default: true }));
  return ask(ROLL_BACK_QUESTION);
}
