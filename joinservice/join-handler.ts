/**
 * One join or rejoin call, from the JoinHello to the sealed ticket or the refusal (docs/design.md#attested-channels, docs/design.md#nodes), whatever
 * transport carries the stream: the JoinHello is checked for form, then the node attests (fresh nonce; the
 * document must pass the validator of the current attestation config and its userData must bind the
 * purpose "join"/"rejoin", the node's ephemeral key and every JoinHello field), and only then is a ticket
 * made, signed with the cluster's join-service identity key over the node's ephemeral key (so the node can tell a
 * genuine join service from anyone else who can seal to it), and sealed to that key. The join configuration comes from the cluster store, read when the evidence
 * arrives (./join-config.ts): a store without quorum refuses the node. A state disk is bound in the store to the
 * instance that first claimed it; its key never goes to another. A refusal is a Failure naming what failed (e.g.
 * the PCR with expected and actual value) with nothing sealed. Every decision is logged with node name, verdict and reason, never a
 * key or token. server.ts puts this behind gRPC.
 */
import { joinHelloBoundFields, joinServerAdapter, verifierServer, type DuplexStream } from '../lib/atls/index.js';
import { createValidator as registryValidator } from '../lib/attestation/registry.js';
import { AttestationError, type Validator, type ValidatorDeps, type VariantConfig } from '../lib/attestation/types.js';
import { StoreUnavailableError, type ClusterStore } from '../lib/cluster-store/types.js';
import { UserError } from '../lib/errors.js';
import type { Logger } from '../lib/logging/index.js';
import type { Clock } from '../lib/clock.js';
import {
  JoinTicket,
  RejoinTicket,
  type JoinHello,
  type JoinRequest,
  type JoinResponse,
} from '../proto/gen/constellation/join.js';
import { BootstrapTokenIssuer, MemoryTokenSink, type TokenSink } from './bootstrap-token.js';
import { JoinConfigReader, type LoadedJoinConfig } from './join-config.js';
import { JoinTicketIssuer, type TicketKind } from './ticket-issuer.js';

export type ValidatorFactory = (
  variant: string,
  config: VariantConfig,
  deps: ValidatorDeps,
) => Validator | Promise<Validator>;

export interface JoinHandlerOptions {
  /** The cluster store the join configuration is read from, and node records and disk claims go to. */
  store: ClusterStore;
  /** Collaborators of the validators (e.g. the provider's AK registry). */
  validatorDeps: ValidatorDeps;
  logger: Logger;
  clock?: Clock;
  /** Where bootstrap tokens are registered (the Kubernetes backend's); default: kept in memory. */
  tokenSink?: TokenSink;
  /** Default: lib/attestation/registry's createValidator. */
  createValidator?: ValidatorFactory;
  /** Longest wait for any one message of a node; default 30 s. */
  stepTimeoutMs?: number;
  /** The provider's instance listing (JoinTicketIssuerOptions.instanceAddresses), for kubelet certificate names. */
  instanceAddresses?: (nodeName: string) => Promise<string[] | undefined>;
  /** Runs before a control plane's ticket names the store's members (bootstrapper/store-host.ts beforePeerJoins). */
  beforePeerJoins?: () => Promise<void>;
}

export interface JoinHandler {
  /** Serves one call to its end; never throws (a refusal is logged and sent to the node). */
  serve(call: DuplexStream<JoinResponse, JoinRequest>, kind: TicketKind, peer: string): Promise<void>;
}

/** Reads the join configuration once (a UserError when the store has none, or no quorum) and returns the handler. */
export async function createJoinHandler(options: JoinHandlerOptions): Promise<JoinHandler> {
  const createValidator = options.createValidator ?? registryValidator;
  const clock = options.clock ?? (() => new Date());
  const logger = options.logger;
  const { store } = options;
  const tokens = new BootstrapTokenIssuer({ sink: options.tokenSink ?? new MemoryTokenSink(clock), clock });
  const tickets = new JoinTicketIssuer({ tokens, clock, instanceAddresses: options.instanceAddresses });
  /** Where a control plane joins the store; the store host hears of the new member first. */
  const endpointsForNewMember = async () => {
    await options.beforePeerJoins?.();
    return store.memberEndpoints();
  };

  // One validator per configuration, built when it is read: a configuration whose validator cannot be built
  // (unknown variant, malformed measurements) is refused like a malformed one, keeping the last good one.
  const validators = new WeakMap<LoadedJoinConfig, Validator>();
  const reader = new JoinConfigReader(store, {
    logger,
    accept: async (config) => {
      const deps: ValidatorDeps = {
        now: clock,
        warn: (message) => logger.warn('attestation warning', { message }),
        ...options.validatorDeps,
      };
      const all = [config.attestation.config, ...(config.attestation.previous ?? [])];
      validators.set(
        config,
        acceptAny(await Promise.all(all.map((c) => createValidator(config.attestation.variant, c, deps)))),
      );
    },
  });
  // A store that is down now (a control plane recovered before the others) is not a reason to stay down: each
  // request reads it again. A store without any join configuration is.
  await reader.current().catch((err: unknown) => {
    if (!(err instanceof StoreUnavailableError)) throw err;
    logger.warn('the cluster store has no quorum yet; joins are refused until it has', { reason: err.message });
  });

  return {
    async serve(call, kind, peer) {
      let hello: JoinHello | undefined;
      let config: LoadedJoinConfig | undefined;
      // The configuration is read when the node's evidence arrives, so a store without quorum refuses the node
      // (through the exchange's Failure) and a measurement written a moment ago applies to this request.
      const validator: Validator = {
        variant: 'join-configuration',
        async validate(document, nonce) {
          config = await reader.current();
          return validators.get(config)!.validate(document, nonce);
        },
      };
      try {
        const session = await verifierServer(call, joinServerAdapter, {
          purpose: kind,
          peer: `the node at ${peer}`,
          timeoutMs: options.stepTimeoutMs,
          validator,
          hello: {
            what: 'the join request',
            bound: (message) => {
              if (message.kind?.$case !== 'hello')
                throw new UserError('The first message of a join must be the join request (JoinHello).');
              hello = message.kind.value;
              tickets.checkHello(hello, kind);
              return joinHelloBoundFields(hello);
            },
          },
          secrets: async (verified) => {
            tickets.checkIdentity(hello!, verified.result.instance);
            const instance = verified.result.instance?.name ?? hello!.nodeName;
            const owner = await store.claimDisk(hello!.diskUuid, instance);
            if (owner !== instance) {
              throw new AttestationError(
                `The state disk ${hello!.diskUuid} belongs to instance "${owner}", not to "${instance}": its key goes to that instance only.`,
              );
            }
            const ticket =
              kind === 'join'
                ? JoinTicket.encode(
                    await tickets.joinTicket(
                      hello!,
                      config!,
                      hello!.isControlPlane ? await endpointsForNewMember() : [],
                      verified.result.instance,
                    ),
                  ).finish()
                : RejoinTicket.encode(tickets.rejoinTicket(hello!, config!)).finish();
            return tickets.sign(ticket, kind, verified.publicKey, config!);
          },
        });
        session.channel.end();
        // The record says when the node came in; it decides nothing, so it is written once the ticket is on its way
        // (one consensus write less in front of every join), and a failure to write it is only logged.
        await recordNode(store, hello!, kind, clock).catch((err: unknown) =>
          logger.warn('the node record was not written', {
            node: hello?.nodeName,
            reason: (err as Error)?.message ?? String(err),
          }),
        );
        logger.info(`${kind} ticket issued`, {
          ...describe(hello, peer, kind),
          verdict: 'accepted',
          configGeneration: config?.generation,
          warnings: session.peer.result.warnings,
        });
      } catch (err) {
        const userError = err instanceof UserError;
        (userError ? logger.warn : logger.error)(`${kind} refused`, {
          ...describe(hello, peer, kind),
          verdict: 'refused',
          reason: userError ? err.message : `internal error: ${(err as Error)?.message ?? String(err)}`,
          configGeneration: config?.generation,
        });
      }
    },
  };
}

/** The node's record in the store: when it first joined, and how it came in last. */
async function recordNode(store: ClusterStore, hello: JoinHello, kind: TicketKind, clock: Clock): Promise<void> {
  const now = clock().toISOString();
  const earlier = await store.getNode(hello.nodeName);
  await store.putNode({
    name: hello.nodeName,
    role: hello.isControlPlane ? 'control-plane' : 'worker',
    diskUuid: hello.diskUuid,
    joinedAt: earlier?.joinedAt ?? now,
    lastEntry: kind,
    lastEntryAt: now,
  });
}

/** Accepts what any of the validators accepts (current measurements first); a refusal reports the first's reason. */
function acceptAny(validators: Validator[]): Validator {
  if (validators.length === 1) return validators[0];
  return {
    variant: validators[0].variant,
    async validate(document, nonce) {
      let first: unknown;
      for (const validator of validators) {
        try {
          return await validator.validate(document, nonce);
        } catch (err) {
          if (!(err instanceof AttestationError)) throw err;
          first ??= err;
        }
      }
      throw first;
    },
  };
}

/** What a decision's log line says about the node (as the node sent it: unverified when refused). */
function describe(hello: JoinHello | undefined, peer: string, kind: TicketKind) {
  return { kind, peer, nodeName: hello?.nodeName, diskUuid: hello?.diskUuid, controlPlane: hello?.isControlPlane };
}
