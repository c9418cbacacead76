/**
 * `verify` (Constellation: "the clusterID uniquely identifies a cluster and can be used to verify your cluster"):
 * asks a node's verify service (port 30081) for an attestation document over a fresh nonce, validates it against
 * the config's measurements, and checks that PCR 15 holds the value the clusterID gives
 * (PCR15 = H(0 ‖ H(clusterID)), docs/design.md#keys-and-identities): the node runs the expected software AND belongs to this cluster.
 *
 *   targets: -e host[:port] │ --all: every instance the provider lists │ default: the cluster endpoint
 *      └─ per target, concurrently: GetAttestation(nonce) → validate (AK trust, quote, PCRs) → PCR 15 = expected?
 *
 * Nothing secret crosses the verify service; the result is only as good as the measurements in the config.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AttestationDocument, ValidatorDeps, Validator } from '../../lib/attestation/types.js';
import { attestationConfigOf, attestationVariantOf, loadConfig } from '../../lib/config/index.js';
import { withPort } from '../../lib/addresses.js';
import { isUserError, UserError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logging/index.js';
import { readStateOrEmpty } from '../../lib/workspace/state.js';
import type { InfrastructureProvider, ResourceJournal } from '../../providers/contract.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { workspaceValidator, type ValidatorFactory } from './provider.js';
import { VERIFY_PORT } from './status.js';

export type { ValidatorFactory };

export interface VerifyOptions {
  workspaceDir: string;
  log: Logger;
  /** host[:port] of one node's verify service; default: the cluster endpoint. */
  nodeEndpoint?: string;
  /** Every node the provider lists (needs `provider` and `journal`). */
  all?: boolean;
  provider?: InfrastructureProvider;
  journal?: ResourceJournal;
  /** Hex; default: the state's clusterID. */
  clusterId?: string;
  /** Default: the provider's attestation deps for the cluster in the state. */
  validatorDeps?: Partial<ValidatorDeps>;
  createValidator?: ValidatorFactory;
  /** Default port of the verify service (30081). */
  port?: number;
  timeoutMs?: number;
}

export type VerifyOutcome = 'verified' | 'refused' | 'unreachable';

export interface NodeVerification {
  /** The node's name (from the provider, or the instance the attestation vouches for), else its address. */
  node: string;
  address: string;
  outcome: VerifyOutcome;
  /** Why it was refused or could not be asked: names the PCR with its expected and actual value. */
  reason?: string;
  /** The PCR values of the verified quote, index → hex (refused nodes: when the document was valid). */
  pcrs?: Record<string, string>;
  warnings: string[];
  /** The document as the node sent it (for `-o raw`). */
  document?: AttestationDocument;
  /** The nonce (hex) the document was made for: `attestation verify` needs it to check the quote again. */
  nonce?: string;
}

export interface VerifyResult {
  clusterId: string;
  variant: string;
  nodes: NodeVerification[];
}

export async function verifyCluster(options: VerifyOptions): Promise<VerifyResult> {
  const { workspaceDir, log } = options;
  const [config, state] = await Promise.all([loadConfig(workspaceDir), readStateOrEmpty(workspaceDir)]);
  const clusterIdHex = (options.clusterId ?? state.clusterValues.clusterID).toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(clusterIdHex)) {
    throw new UserError(
      options.clusterId !== undefined
        ? `--cluster-id must be 64 hex digits (a cluster ID as \`constellation init\` prints it), not "${options.clusterId}".`
        : 'This workspace has no cluster ID: the cluster was not initialized from it.',
      {
        hint: 'Pass the cluster ID with --cluster-id, or run verify in the workspace that initialized the cluster (-C <dir>).',
      },
    );
  }
  const clusterId = Buffer.from(clusterIdHex, 'hex');
  const variant = attestationVariantOf(config);
  // PCR 15 is checked against the cluster ID below; the config's entry (zero, warn only: a node before init) is not.
  const { measurements, ...rest } = attestationConfigOf(config);
  const { [String(CLUSTER_PCR)]: _clusterPcr, ...imageMeasurements } = measurements;
  const validator = await workspaceValidator({
    config,
    state,
    // A node named with -e in a workspace without a created cluster: the provider finds its AK trust from the address.
    nodeAddress: options.nodeEndpoint,
    attestationConfig: { ...rest, measurements: imageMeasurements },
    validatorDeps: options.validatorDeps,
    createValidator: options.createValidator,
    warn: () => undefined, // warnings are read from each result
  });
  const targets = await verifyTargets(options, state.infrastructure.clusterEndpoint);
  log.info('verifying', { targets: targets.map((t) => t.address), clusterId: clusterIdHex, variant });
  const nodes = await Promise.all(targets.map((target) => verifyNode(target, validator, clusterId, options)));
  for (const n of nodes)
    log.info('node verified', { node: n.node, address: n.address, outcome: n.outcome, reason: n.reason });
  return { clusterId: clusterIdHex, variant, nodes };
}

interface Target {
  name?: string;
  address: string;
  /** Why it cannot be asked at all (a stopped instance). */
  skip?: string;
}

async function verifyTargets(options: VerifyOptions, clusterEndpoint: string): Promise<Target[]> {
  const port = options.port ?? VERIFY_PORT;
  if (options.all) {
    if (!options.provider || !options.journal) throw new Error('verify --all needs the provider and the journal');
    const instances = await options.provider.listInstances({
      journal: clusterJournalView(options.journal),
      log: options.log,
      workspaceDir: options.workspaceDir,
    });
    if (instances.length === 0)
      throw new UserError('The provider lists no nodes of this cluster.', {
        hint: 'Check the workspace (-C <dir>); `constellation status` shows the nodes.',
      });
    return instances.map((i) => {
      const host = i.publicIp || i.privateIp;
      return {
        name: i.name,
        address: host ? withPort(host, port) : '',
        ...(i.state !== 'running'
          ? { skip: `the instance is ${i.state}` }
          : !host
            ? { skip: 'the instance has no address' }
            : {}),
      };
    });
  }
  const endpoint = options.nodeEndpoint ?? clusterEndpoint;
  if (!endpoint) {
    throw new UserError('This workspace has no cluster endpoint.', {
      hint: 'Name a node with -e HOST[:PORT], or run verify in the workspace of the cluster (-C <dir>).',
    });
  }
  return [{ address: withPort(endpoint, port) }];
}

async function verifyNode(
  target: Target,
  validator: Validator,
  clusterId: Uint8Array,
  options: VerifyOptions,
): Promise<NodeVerification> {
  const base = { node: target.name ?? target.address, address: target.address, warnings: [] as string[] };
  if (target.skip) return { ...base, outcome: 'unreachable', reason: target.skip };
  const [{ requestVerifiedAttestation }, { AttestationError }] = await Promise.all([
    import('../../lib/atls/verify-service.js'),
    import('../../lib/attestation/types.js'),
  ]);
  let peer;
  const nonce = new Uint8Array(randomBytes(32));
  try {
    peer = await requestVerifiedAttestation(target.address, {
      validator,
      timeoutMs: options.timeoutMs ?? 10_000,
      nonce,
    });
  } catch (err) {
    if (err instanceof AttestationError)
      return {
        ...base,
        outcome: 'refused',
        reason: err.message,
        ...(err.comparisons ? { pcrs: actualValues(err.comparisons) } : {}),
      };
    if (isUserError(err)) return { ...base, outcome: 'unreachable', reason: err.message };
    throw err;
  }
  const named = {
    ...base,
    node: target.name ?? peer.result.instance?.name ?? target.address,
    warnings: peer.result.warnings,
    document: peer.document,
    nonce: Buffer.from(nonce).toString('hex'),
  };
  const pcrs = Object.fromEntries(
    [...peer.result.pcrs].sort(([a], [b]) => a - b).map(([i, v]) => [String(i), Buffer.from(v).toString('hex')]),
  );
  const actual = peer.result.pcrs.get(CLUSTER_PCR);
  const expected = actual ? expectedClusterPcr(clusterId, actual.length) : undefined;
  if (!actual || !expected)
    return {
      ...named,
      outcome: 'refused',
      pcrs,
      reason: `the attestation carries no PCR ${CLUSTER_PCR} of a SHA-256 or SHA-384 bank`,
    };
  if (Buffer.from(actual).equals(Buffer.from(expected))) return { ...named, outcome: 'verified', pcrs };
  const actualHex = Buffer.from(actual).toString('hex');
  const reason = actual.every((b) => b === 0)
    ? `it belongs to no cluster: PCR ${CLUSTER_PCR} is zero (the node was not initialized and has not joined since it booted)`
    : `it belongs to another cluster: PCR ${CLUSTER_PCR}: expected ${Buffer.from(expected).toString('hex')}, got ${actualHex}`;
  return { ...named, outcome: 'refused', pcrs, reason };
}

/** The PCR that names the cluster a node belongs to (docs/design.md#keys-and-identities). */
const CLUSTER_PCR = 15;

/** PCR 15 after one extend with the clusterID from zero, in the bank of `size` bytes (32: SHA-256, 48: SHA-384). */
export function expectedClusterPcr(clusterId: Uint8Array, size: number): Uint8Array | undefined {
  const alg = size === 32 ? 'sha256' : size === 48 ? 'sha384' : undefined;
  if (!alg) return undefined;
  const event = createHash(alg).update(clusterId).digest();
  return new Uint8Array(createHash(alg).update(Buffer.alloc(size)).update(event).digest());
}

function actualValues(comparisons: { index: number; actual?: string }[]): Record<string, string> {
  return Object.fromEntries(
    comparisons.filter((c) => c.actual !== undefined).map((c) => [String(c.index), c.actual as string]),
  );
}
