/**
 * `recover` (Constellation: "the master secret can be used to recover your cluster"): when every control-plane
 * node rebooted, no join service is left to hand out rejoin tickets, and each control plane waits with its
 * recovery server (port 9999) for the master secret. Per node:
 *
 *   Recover stream: CLI challenge (nonce, CLI key) → node evidence → CLI validates it against the config's
 *   measurements → ONLY THEN the sealed master secret → node derives its disk key, unlocks its disk (a wrong
 *   secret is refused and changes nothing), extends PCR 15, restarts its join service → RecoverDone(node name)
 *
 * Targets: -e HOST[:PORT] (a node, or the load balancer: asked again after each success, until no recovery server
 * answers), else every control-plane node the provider lists, concurrently; a node that is already back is
 * skipped. A node still booting (or a load balancer not ready) is asked again until the deadline.
 */
import { withPort } from '../../lib/addresses.js';
import type { Clock, Sleep } from '../../lib/clock.js';
import { pollUntil } from '../../lib/poll.js';
import type { Validator } from '../../lib/attestation/types.js';
import { loadConfig } from '../../lib/config/index.js';
import { isUserError, UserError } from '../../lib/errors.js';
import { deriveClusterId, deriveMeasurementSecret, type MasterSecret } from '../../lib/kms/index.js';
import type { Logger } from '../../lib/logging/index.js';
import { masterSecretPath, readMasterSecret } from '../../lib/workspace/master-secret.js';
import { readStateOrEmpty } from '../../lib/workspace/state.js';
import type { InfrastructureProvider, ResourceJournal } from '../../providers/contract.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import { workspaceValidator } from './provider.js';
import { getNodeStatus, VERIFY_PORT } from './status.js';
import type { ValidatorFactory } from './verify.js';

export const RECOVERY_PORT = 9999;

export interface RecoverOptions {
  workspaceDir: string;
  log: Logger;
  /** host[:port]: one node, or a load balancer in front of the control planes. */
  endpoint?: string;
  /** Lists the control-plane nodes when no endpoint is given. */
  provider?: InfrastructureProvider;
  journal?: ResourceJournal;
  /** One line per node as it happens ("recovered control-plane-1"). */
  progress?: (line: string) => void;
  validatorDeps?: Partial<import('../../lib/attestation/types.js').ValidatorDeps>;
  createValidator?: ValidatorFactory;
  port?: number;
  statusPort?: number;
  /** How long to keep asking a node (or a load balancer) that does not answer yet. */
  timeoutMs?: number;
  retryIntervalMs?: number;
  sleep?: Sleep;
  clock?: Clock;
}

export interface NodeRecovery {
  node: string;
  address: string;
  outcome: 'recovered' | 'already-back' | 'refused' | 'unreachable';
  reason?: string;
}

export interface RecoverResult {
  nodes: NodeRecovery[];
}

type Attempt = { done: { node: string } } | { refused: string } | { unreachable: string };

export async function recoverCluster(options: RecoverOptions): Promise<RecoverResult> {
  const { workspaceDir, log } = options;
  const [config, state] = await Promise.all([loadConfig(workspaceDir), readStateOrEmpty(workspaceDir)]);
  if (!options.endpoint && !state.infrastructure.uid) {
    // After terminate (or before create) the state is empty: no node is left that could wait for its master secret.
    throw new UserError(
      `The workspace ${workspaceDir} has no cluster: it was terminated, or never created. There is nothing to recover.`,
      {
        hint: "recover brings back a running cluster whose control planes all rebooted; run it in that cluster's workspace (-C <dir>), or name one of its nodes with -e HOST[:PORT]. A terminated cluster cannot be recovered: create a new one (`constellation apply`, or `constellation mini up` for a local cluster).",
      },
    );
  }
  const master = await readMasterSecret(workspaceDir);
  const validator = await workspaceValidator({
    config,
    state,
    nodeAddress: options.endpoint,
    validatorDeps: options.validatorDeps,
    createValidator: options.createValidator,
    warn: (message) => log.warn('attestation warning', { message }),
  });
  const port = options.port ?? RECOVERY_PORT;
  const ask = (address: string) => recoverOne(address, validator, master);
  let nodes: NodeRecovery[];
  if (options.endpoint) {
    nodes = await recoverThroughEndpoint(withPort(options.endpoint, port), ask, options);
  } else {
    if (!options.provider || !options.journal)
      throw new Error('recover needs an endpoint, or the provider and the journal');
    const instances = await options.provider.listInstances({
      journal: clusterJournalView(options.journal),
      log,
      workspaceDir,
    });
    const controlPlanes = instances.filter((i) => i.role === 'control-plane');
    if (controlPlanes.length === 0)
      throw new UserError('The provider lists no control-plane node of this cluster.', {
        hint: 'Check the workspace (-C <dir>), or name a node with -e HOST[:PORT].',
      });
    nodes = await Promise.all(
      controlPlanes.map((i) => recoverNode(i.name, i.publicIp || i.privateIp, i.state === 'running', ask, options)),
    );
  }
  for (const n of nodes)
    log.info('recovery', { node: n.node, address: n.address, outcome: n.outcome, reason: n.reason });
  const refused = nodes.filter((n) => n.outcome === 'refused');
  if (refused.length > 0) {
    const clusterId = state.clusterValues.clusterID;
    const mismatch =
      clusterId &&
      state.clusterValues.measurementSalt &&
      !masterSecretGives(master, state.clusterValues.measurementSalt, clusterId);
    throw new UserError(`Recovery was refused:\n${refused.map((n) => `  ${n.node}: ${n.reason}`).join('\n')}`, {
      hint: mismatch
        ? `The master secret in ${masterSecretPath(workspaceDir)} is not this cluster's: it does not give the cluster ID in the state (${clusterId}). Restore the master secret \`constellation init\` wrote for this cluster from your backup, then run recover again.`
        : `Check that ${masterSecretPath(workspaceDir)} is the master secret this cluster was initialized with, and that the config's measurements are those of the nodes' image. The refused nodes keep waiting unchanged; run recover again once fixed.`,
    });
  }
  return { nodes };
}

/** A control-plane node: skipped when it is back already, else asked until it answers or the deadline passes. */
async function recoverNode(
  name: string,
  host: string,
  running: boolean,
  ask: (address: string) => Promise<Attempt>,
  options: RecoverOptions,
): Promise<NodeRecovery> {
  const address = host ? withPort(host, options.port ?? RECOVERY_PORT) : '';
  if (!running || !host) {
    const outcome: NodeRecovery = {
      node: name,
      address,
      outcome: 'unreachable',
      reason: running ? 'the instance has no address' : 'the instance does not run',
    };
    options.progress?.(`${name}: not recovered: ${outcome.reason}`);
    return outcome;
  }
  let last = '';
  return pollUntil<NodeRecovery>(
    async () => {
      const state = await nodeState(host, options);
      if (state === 'initialized' || state === 'joined') {
        options.progress?.(`${name}: already back in the cluster, nothing to recover`);
        return { node: name, address, outcome: 'already-back' };
      }
      const attempt = await ask(address);
      if ('done' in attempt) {
        options.progress?.(`recovered ${name}`);
        return { node: name, address, outcome: 'recovered' };
      }
      if ('refused' in attempt) {
        options.progress?.(`${name}: refused: ${attempt.refused}`);
        return { node: name, address, outcome: 'refused', reason: attempt.refused };
      }
      last = attempt.unreachable;
      return undefined;
    },
    {
      ...waitOptions(options),
      onTimeout: () => {
        options.progress?.(`${name}: not recovered: ${last}`);
        return { node: name, address, outcome: 'unreachable', reason: last };
      },
    },
  );
}

/**
 * One endpoint (a node or a load balancer): ask, and after each success ask again (behind a load balancer the next
 * control plane answers), until no recovery server answers. Before the first answer, keep trying until the deadline:
 * the load balancer or the nodes may not be ready yet.
 */
async function recoverThroughEndpoint(
  address: string,
  ask: (address: string) => Promise<Attempt>,
  options: RecoverOptions,
): Promise<NodeRecovery[]> {
  const nodes: NodeRecovery[] = [];
  return pollUntil(
    async () => {
      for (;;) {
        const attempt = await ask(address);
        if ('done' in attempt) {
          nodes.push({ node: attempt.done.node, address, outcome: 'recovered' });
          options.progress?.(`recovered ${attempt.done.node}`);
          continue; // at once: behind a load balancer the next recovery server answers
        }
        if ('refused' in attempt) {
          nodes.push({ node: address, address, outcome: 'refused', reason: attempt.refused });
          options.progress?.(`${address}: refused: ${attempt.refused}`);
          return nodes;
        }
        return nodes.length > 0 ? nodes : undefined; // after an answer, none left: every recovery server is done
      }
    },
    {
      ...waitOptions(options),
      onTimeout: () => {
        throw new UserError(
          `No recovery server answered at ${address} within ${Math.round((options.timeoutMs ?? DEFAULT_TIMEOUT_MS) / 1000)} s.`,
          {
            hint: 'Recovery servers run on nodes that rebooted with a formatted state disk; check the address (port 9999) and `constellation status` (awaiting-recovery).',
          },
        );
      },
    },
  );
}

const DEFAULT_TIMEOUT_MS = 120_000;

/** How long and how often a node or endpoint that does not answer yet is asked again. */
function waitOptions(options: RecoverOptions) {
  return {
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    intervalMs: options.retryIntervalMs ?? 500,
    clock: options.clock,
    sleep: options.sleep,
  };
}

/** What the node's bootstrapper says it is doing ('' when it does not answer). */
async function nodeState(host: string, options: RecoverOptions): Promise<string> {
  try {
    return (await getNodeStatus(withPort(host, options.statusPort ?? VERIFY_PORT), 2000)).state;
  } catch {
    return '';
  }
}

/** One Recover call: the node attests, the CLI validates, and only then seals the master secret to it. */
async function recoverOne(address: string, validator: Validator, master: MasterSecret): Promise<Attempt> {
  const [{ RecoveryClient, RecoverSecrets }, atls, { AttestationError }] = await Promise.all([
    import('../../proto/gen/constellation/recover.js'),
    import('../../lib/atls/index.js'),
    import('../../lib/attestation/types.js'),
  ]);
  const client = new RecoveryClient(address, await atls.createAttestedClientCredentials(), atls.attestedChannelOptions);
  const ready = await new Promise<Error | undefined>((resolve) =>
    client.waitForReady(Date.now() + 3000, (err) => resolve(err)),
  );
  if (ready) {
    client.close();
    return { unreachable: `no recovery server answers at ${address}` };
  }
  const call = client.recover();
  try {
    const session = await atls.verifierClient(call, atls.recoverClientAdapter, {
      purpose: 'recover',
      peer: `the node at ${address}`,
      validator,
      timeoutMs: 60_000,
      secrets: () =>
        RecoverSecrets.encode({ masterKey: Buffer.from(master.key), masterSalt: Buffer.from(master.salt) }).finish(),
    });
    const done = await session.channel.receive(['other'], 'the recovery result');
    session.channel.end();
    if (done.value.kind?.$case !== 'done') return { refused: 'the node answered something other than RecoverDone' };
    return { done: { node: done.value.kind.value.nodeName || address } };
  } catch (err) {
    call.cancel();
    if (err instanceof atls.PeerFailureError) return { refused: err.peerMessage };
    if (err instanceof AttestationError)
      return { refused: `its attestation was rejected, so nothing was sent: ${err.message}` };
    if (isUserError(err)) return { unreachable: err.message };
    throw err;
  } finally {
    client.close();
  }
}

function masterSecretGives(master: MasterSecret, measurementSaltHex: string, clusterIdHex: string): boolean {
  const id = deriveClusterId(deriveMeasurementSecret(master), Buffer.from(measurementSaltHex, 'hex'));
  return Buffer.from(id).toString('hex') === clusterIdHex.toLowerCase();
}
