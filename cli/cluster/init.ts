/**
 * `init` (docs/design.md#the-product step 3): sends the master secret to the first control-plane node, but only after that node
 * proved by attestation that it runs what the config's measurements expect. Everything a re-run needs is written
 * BEFORE anything is sent: the master secret (constellation-mastersecret.json, written once, never overwritten;
 * an existing one is reused) and the measurement salt (in the state). So an init killed at any point re-runs with
 * the same secrets, and the node (which recognises a repeated init with the same secrets) answers the same result.
 * On success the state gets clusterValues (clusterID, measurement salt), and the workspace the admin kubeconfig and
 * the cluster store's admin credentials (constellation-store.json).
 * On a node's failure its log goes to constellation-cluster.log.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ValidatorDeps } from '../../lib/attestation/types.js';
import { attestationConfigOf, attestationVariantOf, loadConfig } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import {
  deriveClusterId,
  deriveMeasurementSecret,
  generateMasterSecret,
  generateMeasurementSalt,
  type MasterSecret,
  type RandomSource,
} from '../../lib/kms/index.js';
import type { Logger } from '../../lib/logging/index.js';
import { FileExistsError, writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import {
  ADMIN_CONF_FILE,
  CLUSTER_LOG_FILE,
  MASTER_SECRET_FILE,
  pathExists,
  STORE_CREDENTIALS_FILE,
} from '../../lib/workspace/files.js';
import { masterSecretPath, readMasterSecret, writeMasterSecret } from '../../lib/workspace/master-secret.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { readState, writeState, type Infrastructure } from '../../lib/workspace/state.js';
import { INIT_PORT, InitFailedError, runInitExchange } from './init-exchange.js';
import { workspaceValidator, type ValidatorFactory } from './provider.js';
import { TERMINATE_HINT } from './next-steps.js';

export type { ValidatorFactory };

export interface InitOptions {
  workspaceDir: string;
  log: Logger;
  progress?: (message: string) => void;
  random?: RandomSource;
  /** Collaborators of the validator; default: the provider's attestation deps for the cluster in the state. */
  validatorDeps?: Partial<ValidatorDeps>;
  /** Default: lib/attestation/registry's createValidator. */
  createValidator?: ValidatorFactory;
  /** The bootstrapper's init port on the cluster endpoint (9000). */
  port?: number;
  connectTimeoutMs?: number;
  stepTimeoutMs?: number;
  /**
   * Tells the provider that the cluster is initialized, so that its nodes' metadata stops carrying the init-secret
   * hash and no node added later serves Init; default: the workspace provider's markInitialized, where it has one.
   */
  markInitialized?: () => Promise<void>;
}

export interface InitClusterResult {
  /** Hex. */
  clusterId: string;
  /** The node's Kubernetes backend ("none" on local process nodes, "kubeadm" on node images that run Kubernetes). */
  kubernetesBackend: string;
  /** The admin kubeconfig written; empty where the cluster runs no Kubernetes (backend none): none is written. */
  kubeconfigFile: string;
  /** Where an earlier, different kubeconfig was moved to (it is never overwritten). */
  previousKubeconfigFile?: string;
  /** The state already recorded this cluster as initialized: nothing was sent. */
  alreadyInitialized: boolean;
  /** Attestation warnings (warnOnly PCRs that differ). */
  warnings: string[];
}

export async function initCluster(options: InitOptions): Promise<InitClusterResult> {
  const { workspaceDir, log } = options;
  const random = options.random ?? randomBytes;
  const config = await loadConfig(workspaceDir);
  const state = await readState(workspaceDir);
  const infra = state.infrastructure;
  if (!infra.clusterEndpoint) {
    throw new UserError(
      infra.uid
        ? "The cluster's creation did not finish: the state has no cluster endpoint yet."
        : 'This workspace has no cluster yet: the state has no infrastructure.',
      {
        hint: infra.uid
          ? 'Run `constellation create` again to finish it, then `constellation init`.'
          : 'Run `constellation create` first.',
      },
    );
  }
  const kubeconfigFile = path.join(workspaceDir, ADMIN_CONF_FILE);

  if (state.clusterValues.clusterID) {
    // Initialized before: never make a new master secret here, the cluster's own is needed.
    const master = await readMasterSecret(workspaceDir);
    const clusterId = expectedClusterId(master, Buffer.from(state.clusterValues.measurementSalt, 'hex'));
    if (clusterId !== state.clusterValues.clusterID.toLowerCase()) {
      throw new UserError(
        `The master secret ${masterSecretPath(workspaceDir)} does not belong to the cluster in the state (cluster ID ${state.clusterValues.clusterID}).`,
        {
          hint: `The cluster was initialized with another master secret; restore that one from your backup. ${TERMINATE_HINT}`,
        },
      );
    }
    log.info('cluster already initialized', { clusterId });
    // Again: a run killed between the state write and the provider's mark continues here.
    const warnings = await markInitialized(options);
    return {
      clusterId,
      kubernetesBackend: '',
      kubeconfigFile: (await pathExists(kubeconfigFile)) ? kubeconfigFile : '',
      alreadyInitialized: true,
      warnings,
    };
  }

  const master = await masterSecretForInit(workspaceDir, random, log);
  if (!state.clusterValues.measurementSalt) {
    // Persisted before it is sent: a re-run sends the same salt, so the node derives the same clusterID.
    state.clusterValues.measurementSalt = Buffer.from(generateMeasurementSalt(random)).toString('hex');
    await writeState(workspaceDir, state);
  }
  const measurementSalt = Buffer.from(state.clusterValues.measurementSalt, 'hex');

  const variant = attestationVariantOf(config);
  const attestationConfig = attestationConfigOf(config);
  const warnings: string[] = [];
  const validator = await workspaceValidator({
    config,
    state,
    attestationConfig,
    validatorDeps: options.validatorDeps,
    createValidator: options.createValidator,
    warn: (message: string) => {
      warnings.push(message);
      log.warn('attestation warning', { message });
    },
  });

  const address = `${infra.clusterEndpoint}:${options.port ?? INIT_PORT}`;
  log.info('initializing', { address, variant });
  options.progress?.(`connecting to the bootstrapper at ${address}`);
  let result;
  try {
    result = await runInitExchange({
      address,
      validator,
      connectTimeoutMs: options.connectTimeoutMs,
      stepTimeoutMs: options.stepTimeoutMs,
      progress: (step, message) => {
        log.debug('init progress', { step, message });
        // The none backend's notice is the commands' closing line (init, mini up): shown once, there, in full.
        const shown =
          step === 'kubernetes' && message.startsWith('Kubernetes is not run')
            ? 'no Kubernetes to set up (backend none)'
            : message || step;
        options.progress?.(shown);
      },
      secrets: {
        masterKey: Buffer.from(master.key),
        masterSalt: Buffer.from(master.salt),
        initSecret: Buffer.from(infra.initSecret, 'hex'),
        measurementSalt,
        kubernetesVersion: config.kubernetesVersion,
        clusterName: infra.name || config.name,
        apiServerCertSans: infra.apiServerCertSANs,
        serviceCidr: config.serviceCIDR,
        ...networkOf(infra),
        attestationConfig: Buffer.from(JSON.stringify({ variant, config: attestationConfig })),
      },
    });
  } catch (err) {
    if (err instanceof InitFailedError) throw await failedInit(workspaceDir, err, log);
    throw err;
  }

  const clusterId = Buffer.from(result.clusterId).toString('hex');
  const expected = expectedClusterId(master, measurementSalt);
  if (clusterId !== expected) {
    throw new UserError(
      `The node reports cluster ID ${clusterId}, but this workspace's master secret and salt give ${expected}.`,
      {
        hint: `The node was initialized by another workspace or with another master secret. ${TERMINATE_HINT}`,
      },
    );
  }
  // Backend none runs no API server: a kubeconfig would send kubectl to a port that never answers.
  const runsKubernetes = result.kubernetesBackend !== 'none';
  const previousKubeconfigFile = runsKubernetes
    ? await writeKubeconfig(kubeconfigFile, result.kubeconfig, log)
    : undefined;
  if (result.storeCredentials.length > 0) {
    await writeFileAtomic(path.join(workspaceDir, STORE_CREDENTIALS_FILE), result.storeCredentials, { mode: 0o600 });
  }
  state.clusterValues.clusterID = clusterId;
  await writeState(workspaceDir, state);
  log.info('cluster initialized', { clusterId, kubernetesBackend: result.kubernetesBackend });
  warnings.push(...(await markInitialized(options)));
  return {
    clusterId,
    kubernetesBackend: result.kubernetesBackend,
    kubeconfigFile: runsKubernetes ? kubeconfigFile : '',
    previousKubeconfigFile,
    alreadyInitialized: false,
    warnings,
  };
}

/**
 * Asks the provider to stop publishing the init-secret hash. A failure is a warning, not an error: the cluster is
 * initialized, and without the init secret (only this workspace holds it) no node can be initialized anyway.
 */
async function markInitialized(options: InitOptions): Promise<string[]> {
  const { workspaceDir, log } = options;
  try {
    if (options.markInitialized) {
      await options.markInitialized();
    } else {
      const [{ workspaceInfrastructure }, { FileResourceJournal }, { clusterJournalView }] = await Promise.all([
        import('./provider.js'),
        import('../../lib/workspace/resource-journal.js'),
        import('../../lib/workspace/journal-views.js'),
      ]);
      const provider = await workspaceInfrastructure(workspaceDir);
      await provider.markInitialized?.({
        journal: clusterJournalView(new FileResourceJournal(workspaceDir)),
        log,
        workspaceDir,
      });
    }
    return [];
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    log.warn('the provider did not record that the cluster is initialized', { reason });
    return [
      `The provider did not record that the cluster is initialized (${reason}): nodes added later still accept Init from this workspace. Run \`constellation init\` again to retry.`,
    ];
  }
}

/** The workspace's master secret: the existing file, else a new one written (exclusively) now. */
async function masterSecretForInit(workspaceDir: string, random: RandomSource, log: Logger): Promise<MasterSecret> {
  try {
    await fs.access(masterSecretPath(workspaceDir));
    log.info('reusing the existing master secret', { file: MASTER_SECRET_FILE });
    return await readMasterSecret(workspaceDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const secret = generateMasterSecret(random);
  try {
    await writeMasterSecret(workspaceDir, secret);
  } catch (err) {
    // Someone wrote one between the check and the write: theirs counts, ours was never used.
    if (err instanceof FileExistsError) return readMasterSecret(workspaceDir);
    throw err;
  }
  log.info('wrote a new master secret', { file: MASTER_SECRET_FILE });
  return secret;
}

function expectedClusterId(master: MasterSecret, measurementSalt: Uint8Array): string {
  return Buffer.from(deriveClusterId(deriveMeasurementSecret(master), measurementSalt)).toString('hex');
}

/** Writes the kubeconfig; a different existing one is moved aside (never overwritten) and its new name returned. */
async function writeKubeconfig(file: string, kubeconfig: Uint8Array, log: Logger): Promise<string | undefined> {
  try {
    await writeFileAtomic(file, kubeconfig, { exclusive: true, mode: 0o600, what: 'the kubeconfig' });
    return undefined;
  } catch (err) {
    if (!(err instanceof FileExistsError)) throw err;
  }
  if (
    Buffer.from(kubeconfig).equals(
      await readRegularFile(file, { what: 'the kubeconfig', maxBytes: SIZE_LIMITS.kubeconfig }),
    )
  )
    return undefined;
  const aside = `${file}.${new Date().toISOString().replace(/[:.]/g, '-')}.old`;
  await fs.rename(file, aside);
  await writeFileAtomic(file, kubeconfig, { exclusive: true, mode: 0o600, what: 'the kubeconfig' });
  log.warn('moved an earlier kubeconfig aside', { file: aside });
  return aside;
}

/** Writes the node's log to constellation-cluster.log and says where it is. */
async function failedInit(workspaceDir: string, err: InitFailedError, log: Logger): Promise<UserError> {
  const logFile = path.join(workspaceDir, CLUSTER_LOG_FILE);
  await writeFileAtomic(logFile, err.nodeLog, { mode: 0o600, what: "the node's log" });
  log.error('the node failed to initialize', { message: err.nodeMessage, logFile });
  return new UserError(err.message, {
    hint: `The node's log is in ${logFile}. Fix the cause, then run \`constellation init\` again: the master secret in ${MASTER_SECRET_FILE} is kept and reused.`,
    cause: err,
  });
}

/**
 * The pod and node networks the provider recorded (`infrastructure.ipCidrNode`, and on GCP the subnet's pod range
 * `infrastructure.gcp.ipCidrPod`, as upstream's state file); empty ones leave the bootstrapper's defaults.
 */
function networkOf(infra: Infrastructure): { podCidr: string; nodeCidr: string } {
  const podCidr = infra.gcp?.ipCidrPod;
  return { podCidr: typeof podCidr === 'string' ? podCidr : '', nodeCidr: infra.ipCidrNode ?? '' };
}
