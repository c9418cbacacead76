/**
 * The CLI's way into the cluster store (docs/design.md#cluster-store): with the admin credentials init wrote to the workspace
 * (constellation-store.json, 0600), against the control-plane nodes the provider lists now (members come and go with
 * upgrades; the credentials' own endpoints are the fallback). Used by `status` (member health and quorum) and by
 * upgrades (new measurements written once, here, for every join service).
 */
import path from 'node:path';
import {
  moveLeaderAway,
  removalRefusal,
  removeMember,
  storeHealth,
  type StoreHealth,
} from '../../lib/cluster-store/etcd-members.js';
import { ETCD_CLIENT_PORT, EtcdClusterStore, type EtcdConnection } from '../../lib/cluster-store/etcd.js';
import type { AttestationConfigRecord, ClusterStore, StoreCredentials } from '../../lib/cluster-store/types.js';
import { imageMeasurementsDigest } from '../../lib/attestation/measurements.js';
import { UserError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logging/index.js';
import { ADMIN_CONF_FILE, STORE_CREDENTIALS_FILE } from '../../lib/workspace/files.js';
import { SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { readRequiredFile } from '../../lib/workspace/required-file.js';
import type { Instance } from '../../providers/contract.js';
import type { VerifiedMeasurements } from './trusted-measurements.js';

export function storeCredentialsPath(workspaceDir: string): string {
  return path.join(workspaceDir, STORE_CREDENTIALS_FILE);
}

export async function readStoreCredentials(workspaceDir: string): Promise<StoreCredentials> {
  const file = storeCredentialsPath(workspaceDir);
  const text = await readRequiredFile(
    file,
    'the cluster store credentials',
    'They are written by `constellation init`; run the command in the workspace that initialized the cluster (-C <dir>).',
    SIZE_LIMITS.storeCredentials,
  );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.toString('utf8'));
  } catch {
    throw new UserError(`${file} is not valid JSON.`, {
      hint: 'It is written by `constellation init`; restore it from your backup.',
    });
  }
  // Valid JSON is not yet an object: `null`, a number or a list hold no credentials either.
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UserError(
      `${file} does not hold cluster store credentials (it holds ${parsed === null ? 'null' : Array.isArray(parsed) ? 'a list' : `a ${typeof parsed}`}, not an object).`,
      {
        hint: 'It is written by `constellation init`; restore it from your backup.',
      },
    );
  }
  const value = parsed as Partial<StoreCredentials & { endpoints: unknown; caCert: unknown }>;
  if (value.backend === 'kubernetes') return { backend: 'kubernetes' };
  if (
    value.backend !== 'etcd' ||
    !Array.isArray(value.endpoints) ||
    !value.endpoints.every((e) => typeof e === 'string') ||
    typeof value.caCert !== 'string' ||
    typeof value.clientCert !== 'string' ||
    typeof value.clientKey !== 'string'
  ) {
    throw new UserError(`${file} does not hold cluster store credentials.`, {
      hint: 'It is written by `constellation init`; restore it from your backup.',
    });
  }
  return value as StoreCredentials;
}

/** The etcd connection: the running control planes' client URLs, else those init knew. */
export function etcdConnection(
  credentials: Extract<StoreCredentials, { backend: 'etcd' }>,
  instances: Instance[] = [],
): EtcdConnection {
  const live = instances.filter(
    (i) => i.role === 'control-plane' && i.state === 'running' && (i.privateIp || i.publicIp),
  );
  const endpoints =
    live.length > 0
      ? live.map((i) => `https://${i.privateIp || i.publicIp}:${ETCD_CLIENT_PORT}`)
      : credentials.endpoints;
  return {
    endpoints,
    caCert: credentials.caCert,
    clientCert: credentials.clientCert,
    clientKey: credentials.clientKey,
  };
}

/** A client of the workspace's cluster store. */
export async function openWorkspaceStore(workspaceDir: string, instances: Instance[] = []): Promise<ClusterStore> {
  const credentials = await readStoreCredentials(workspaceDir);
  if (credentials.backend === 'kubernetes') {
    // kubeadm nodes keep the store in the Kubernetes API, reached with the admin kubeconfig init wrote.
    const { KubernetesClusterStore } = await import('../../lib/cluster-store/kubernetes.js');
    return KubernetesClusterStore.connect({ kubeconfig: { path: path.join(workspaceDir, ADMIN_CONF_FILE) } });
  }
  return EtcdClusterStore.connect(etcdConnection(credentials, instances));
}

/** Runs `fn` with a client of the workspace's cluster store, closed after. */
export async function withWorkspaceStore<T>(
  workspaceDir: string,
  instances: Instance[],
  fn: (store: ClusterStore) => Promise<T>,
): Promise<T> {
  const store = await openWorkspaceStore(workspaceDir, instances);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** The store's members and quorum, or undefined when the workspace has no store credentials (not initialized). */
export async function workspaceStoreHealth(
  workspaceDir: string,
  instances: Instance[],
  log: Logger,
): Promise<(StoreHealth & { backend: 'etcd' }) | undefined> {
  let credentials: StoreCredentials;
  try {
    credentials = await readStoreCredentials(workspaceDir);
  } catch (err) {
    log.debug('no cluster store credentials', { reason: (err as Error).message });
    return undefined;
  }
  if (credentials.backend !== 'etcd') return undefined;
  try {
    return { backend: 'etcd', ...(await storeHealth(etcdConnection(credentials, instances))) };
  } catch (err) {
    log.debug('cluster store health unknown', { reason: (err as Error).message });
    return { backend: 'etcd', members: [], healthyVoters: 0, voters: 0, quorum: false };
  }
}

/**
 * Makes verified measurements (./trusted-measurements.ts: nothing else can be written) the store's current set;
 * with keepPrevious the set that was current stays accepted too (a rollout, while old and new nodes run).
 */
export async function setMeasurements(
  store: ClusterStore,
  verified: VerifiedMeasurements,
  options: { keepPrevious?: boolean } = {},
): Promise<AttestationConfigRecord> {
  const { config: current } = await store.readJoinConfig();
  const attestation: AttestationConfigRecord = {
    variant: current.attestation.variant,
    config: { ...current.attestation.config, measurements: verified.measurements },
    ...(options.keepPrevious
      ? { previous: [current.attestation.config, ...(current.attestation.previous ?? [])] }
      : {}),
  };
  await store.writeJoinConfig({ attestation });
  return attestation;
}

/** Accepts the current set alone (a rollout finished: every node runs its image). */
export async function dropPreviousMeasurements(store: ClusterStore): Promise<void> {
  const { config: current } = await store.readJoinConfig();
  if (!current.attestation.previous?.length) return;
  await store.writeJoinConfig({
    attestation: { variant: current.attestation.variant, config: current.attestation.config },
  });
}

/**
 * A rollback of the rollout to the measurements whose digest is `targetDigest`: when the store's current set is that
 * one (the rollout's write happened, whatever the journal recorded), the set that was current before it becomes
 * current again. Only the store's own history is used, never a set from the workspace.
 */
export async function restorePreviousMeasurements(store: ClusterStore, targetDigest: string): Promise<boolean> {
  const { config: current } = await store.readJoinConfig();
  const [before, ...older] = current.attestation.previous ?? [];
  if (!before || imageMeasurementsDigest(current.attestation.config.measurements) !== targetDigest) return false;
  await store.writeJoinConfig({
    attestation: { variant: current.attestation.variant, config: before, ...(older.length ? { previous: older } : {}) },
  });
  return true;
}

/** What the store trusts, as measurement digests: the current set and the previous ones still accepted. */
export async function trustedMeasurements(store: ClusterStore): Promise<{ current: string; previous: string[] }> {
  const { config } = await store.readJoinConfig();
  return {
    current: imageMeasurementsDigest(config.attestation.config.measurements),
    previous: (config.attestation.previous ?? []).map((c) => imageMeasurementsDigest(c.measurements)),
  };
}

/**
 * Takes a control-plane node out of the cluster store before the node goes (an upgrade's replaced node, a control
 * plane scaled away): etcd's member of that name is removed (its leadership handed on first), so the quorum counts
 * only members that exist. The Kubernetes API store has no members of its own (kubeadm's etcd). Returns whether a
 * member was removed.
 */
export async function removeStoreMember(
  workspaceDir: string,
  instances: Instance[],
  nodeName: string,
): Promise<boolean> {
  const credentials = await readStoreCredentials(workspaceDir);
  if (credentials.backend !== 'etcd') return false;
  const { etcdClient } = await import('../../lib/cluster-store/etcd.js');
  const connection = etcdConnection(
    credentials,
    instances.filter((i) => i.name !== nodeName),
  );
  const health = await storeHealth(connection);
  const refusal = removalRefusal(health, nodeName);
  if (refusal) {
    throw new UserError(`${refusal[0].toUpperCase()}${refusal.slice(1)}.`, {
      hint: 'Nothing was removed. Bring the control planes that are down back first (`constellation status` shows them; `constellation mini start` or `constellation recover`).',
    });
  }
  await moveLeaderAway(connection, health, nodeName);
  const client = await etcdClient(connection);
  try {
    return await removeMember(client, nodeName);
  } finally {
    client.close();
  }
}
