/**
 * The join client (docs/design.md#nodes), running on every node in parallel with the init server until the node lock is
 * taken. It finds a join service through the provider's metadata (the load balancer first, then the other
 * control-plane nodes), attests itself with a JoinHello bound into its document, and on a ticket signed with the
 * cluster's join-service identity key (from the metadata; docs/join-service.md) takes the lock, extends PCR 15, formats (join) or unlocks (rejoin) its state disk and joins Kubernetes; a control-plane
 * node then hosts a join service too. A rejoin ticket's key must open the disk before the node commits to it: the
 * lock is held provisionally meanwhile, and given back when the disk refuses the key. A ticket that arrives while
 * another owner holds the lock (init, or `recover` checking its key) is not used; the search goes on until the lock
 * is committed (./node-lock.ts). The search sets the node's state only while the lock is free.
 *
 * A join service that cannot be reached is retried quietly (the cluster may not be up yet); one that refuses
 * the node (its Failure names the PCR that differs) puts the node in state `refused` with that reason, and it
 * keeps asking, with a capped backoff, since a fixed node or updated measurements may be accepted later. The wait
 * after a round in which no join service answered counts from the round's start: a round that waited already (a
 * load balancer holds a connection until a control plane listens, then drops it) starts the next one at once, so
 * the node is not asleep when the join service comes up (docs/bootstrapper.md).
 */
import {
  attestedChannelOptions,
  attestedClient,
  createAttestedClientCredentials,
  decodeMessage,
  joinClientAdapter,
  joinHelloBoundFields,
} from '../lib/atls/index.js';
import { deriveClusterId, ticketSignatureValid } from '../lib/kms/index.js';
import { loadClusterPki, pem } from '../lib/pki/cluster-pki.js';
import {
  JoinServiceClient,
  JoinTicket,
  RejoinTicket,
  SignedTicket,
  type JoinHello,
} from '../proto/gen/constellation/join.js';
import type { NodeMetadata } from '../providers/contract.js';
import { realSleep, type Sleep } from '../lib/clock.js';
import type { Logger } from '../lib/logging/index.js';
import type { KubernetesBackend } from './kubernetes/backend.js';
import type { NodeRoleOptions } from './node-role.js';
import type { LockToken } from './node-lock.js';
import type { NodeState } from './node-status.js';
import { describeError, peerRefusal } from './errors.js';
import { withPort } from '../lib/addresses.js';
import { NO_QUORUM_MESSAGE } from '../lib/cluster-store/types.js';
import { createKubeletCsr, type KubeletCsr } from './kubelet-csr.js';
import { NODE_SSH_CA_FILE } from '../lib/ssh/sshd-config.js';

export type JoinKind = 'join' | 'rejoin';

export interface RetryPolicy {
  /** First wait after a failed round, in ms; doubles each round. */
  initialMs: number;
  /** Longest wait after a round in which a join service refused the node, in ms. */
  maxMs: number;
  /** Longest wait after a round in which no join service answered (the cluster is coming up: ask often), in ms. */
  unreachableMaxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { initialMs: 250, maxMs: 5_000, unreachableMaxMs: 500 };

export interface JoinClientOptions extends NodeRoleOptions {
  metadata: NodeMetadata;
  backend: KubernetesBackend;
  /** Port of the join services to ask (and of this node's own, once it hosts one). */
  joinServicePort: number;
  retry?: RetryPolicy;
  /** Waits between rounds; default: real time. */
  sleep?: Sleep;
  /** Milliseconds of a monotonic clock, to time rounds; default performance.now. */
  now?: () => number;
  /** Asks one join service for a ticket; default: over gRPC with the attested exchange (tests hand in tickets). */
  ask?: AskJoinService;
}

/** What asking one join service gave: the sealed ticket's plaintext and the node's key of the exchange, a refusal, or nothing. */
export type Attempt = { ticket: Uint8Array; ownKey: Uint8Array } | { refused: string } | { unreachable: string };

export type AskJoinService = (
  address: string,
  kind: JoinKind,
  hello: JoinHello,
  signal: AbortSignal,
) => Promise<Attempt>;

/** Files of the kubelet's key and certificate on the state disk. */
export const KUBELET_KEY_FILE = 'kubelet/kubelet.key';
export const KUBELET_CERT_FILE = 'kubelet/kubelet.crt';

export class JoinClient {
  private readonly logger: Logger;
  private csr: KubeletCsr | undefined;

  constructor(private readonly options: JoinClientOptions) {
    this.logger = options.logger.child({ component: 'join' });
  }

  /** Asks until the node holds a ticket and has used it, until another owner committed the lock, or until `signal` aborts. */
  async run(kind: JoinKind, signal: AbortSignal): Promise<void> {
    const { lock, status } = this.options;
    const retry = this.options.retry ?? DEFAULT_RETRY;
    const hello = await this.hello(kind);
    let wait = retry.initialMs;
    let round = 0;
    const ask = this.options.ask ?? ((address, k, h, sig) => this.attempt(address, k, h, sig));
    const now = this.options.now ?? (() => performance.now());
    while (!signal.aborted && !lock.committed) {
      round++;
      const started = now();
      let refused = false;
      let noQuorum: string | undefined;
      const endpoints = await this.discover();
      if (endpoints.length === 0 && round === 1)
        this.logger.info('no join service endpoint known yet; asking the metadata again');
      for (const address of endpoints) {
        if (signal.aborted || lock.committed) return;
        const attempt = await ask(address, kind, hello, signal);
        if ('ticket' in attempt) {
          const ticket = await this.genuine(attempt.ticket, attempt.ownKey, kind, address);
          if (!ticket) continue;
          const token = lock.tryLock('join');
          if (!token) {
            this.logger.info(`${kind} ticket received, but ${lock.owner} holds the node lock; the ticket is not used`);
            if (lock.committed) return;
            break; // The holder may still give the lock back (a key its disk refused): ask again after a wait.
          }
          status.attested('accepted', `the join service at ${address}`);
          if (kind === 'join') {
            lock.commit(token); // A fresh node's join never gives the node back.
          } else if (!(await this.unlockWith(token, ticket, address))) {
            // A rejoin ticket's key must open the disk before the node commits to it (a wrong one changes nothing).
            refused = true;
            break;
          }
          await this.complete(kind, token, ticket);
          return;
        }
        if ('refused' in attempt && attempt.refused.startsWith(NO_QUORUM_MESSAGE)) {
          // Not a verdict on this node: the control plane cannot decide now. Ask the others, and again soon.
          if (noQuorum !== attempt.refused)
            this.logger.warn(`${kind}: the join service cannot answer`, { address, reason: attempt.refused });
          noQuorum = attempt.refused;
          continue;
        }
        if ('refused' in attempt) {
          if (status.get().reason !== attempt.refused)
            this.logger.warn(`${kind} refused by the join service`, { address, reason: attempt.refused });
          this.report('refused', attempt.refused);
          status.attested('refused', `the join service at ${address}`, { reason: attempt.refused });
          refused = true;
          break;
        }
        this.logger.debug('join service not reachable', { address, reason: attempt.unreachable, round });
      }
      if (!refused && kind === 'rejoin') this.noJoinServiceAnswers(noQuorum);
      else if (!refused && noQuorum) this.report('waiting', noQuorum);
      // A refusal waits the whole backoff; a round that found no join service only what is left of it.
      const pause = refused ? wait : Math.round(wait - (now() - started));
      try {
        if (pause > 0) await (this.options.sleep ?? realSleep)(pause, signal);
      } catch {
        return; // aborted
      }
      wait = Math.min(wait * 2, refused ? retry.maxMs : retry.unreachableMaxMs);
    }
  }

  /**
   * A rebooted node that no join service answers: a control-plane node waits for `constellation recover` (its
   * recovery server runs), a worker for a control plane to come back.
   */
  private noJoinServiceAnswers(noQuorum: string | undefined): void {
    const { status, node } = this.options;
    const current = status.get().state;
    if (current !== 'waiting' && current !== 'awaiting-recovery' && current !== 'refused') return;
    const why = noQuorum ? 'the control plane has no quorum' : 'no join service answers';
    if (node.role === 'control-plane') {
      this.report('awaiting-recovery', `${why}: run \`constellation recover\` if control-plane nodes rebooted`);
    } else {
      this.report('waiting', `${why} yet: it rejoins once the control plane is back`);
    }
  }

  /** A result of the search, shown while no owner holds the lock (an owner's state is never overwritten by it). */
  private report(state: NodeState, reason: string): void {
    if (!this.options.lock.locked) this.options.status.set(state, { reason });
  }

  /**
   * The ticket's bytes when it comes from a genuine join service of this node's cluster: signed with the cluster's
   * join-service identity key (whose public half the provider's metadata holds) over this exchange's ephemeral key
   * of the node. Anyone can listen on a join service's address and seal a ticket to this node's key; only a
   * control plane of the cluster holds that key (a worker's ticket does not carry it, a fresh node has none).
   */
  private async genuine(
    sealed: Uint8Array,
    ownKey: Uint8Array,
    kind: JoinKind,
    address: string,
  ): Promise<Uint8Array | undefined> {
    const { ticket, signature } = decodeMessage(SignedTicket, sealed, `The ${kind} ticket`);
    let key: string;
    try {
      key = await this.options.metadata.joinServiceKey();
    } catch (err) {
      this.logger.warn(`${kind} ticket not used: the join-service key cannot be read from the metadata`, {
        address,
        reason: describeError(err),
      });
      return undefined;
    }
    if (key === '') {
      this.logger.warn(
        `${kind} ticket not used: the metadata holds no join-service key to check it with (a cluster created by an earlier version: create it again)`,
        { address },
      );
      return undefined;
    }
    if (ticketSignatureValid(Buffer.from(key, 'base64'), kind, ownKey, ticket, signature)) return ticket;
    this.logger.warn(
      `${kind} ticket not used: it is not signed with this cluster's join-service key, so it does not come from a genuine join service of this cluster`,
      { address },
    );
    return undefined;
  }

  /** The load balancer, then every other control-plane node (each host:port of the join service). */
  private async discover(): Promise<string[]> {
    const { metadata, node, joinServicePort } = this.options;
    const out: string[] = [];
    try {
      out.push(withPort(await metadata.loadBalancerEndpoint(), joinServicePort));
    } catch (err) {
      this.logger.debug('no load balancer endpoint from the metadata', { reason: describeError(err) });
    }
    try {
      for (const peer of await metadata.peers()) {
        if (peer.role === 'control-plane' && peer.vpcIp !== node.ip) out.push(withPort(peer.vpcIp, joinServicePort));
      }
    } catch (err) {
      this.logger.debug('no peers from the metadata', { reason: describeError(err) });
    }
    return [...new Set(out)];
  }

  private async hello(kind: JoinKind): Promise<JoinHello> {
    const { node, stateDisk } = this.options;
    if (kind === 'join') this.csr ??= await createKubeletCsr(node.name, node.ip);
    return {
      diskUuid: stateDisk.uuid,
      certificateRequest: kind === 'join' ? Buffer.from(this.csr!.csr) : Buffer.alloc(0),
      isControlPlane: node.role === 'control-plane',
      nodeName: node.name,
      // A joining node asks for a host certificate for its SSH host key; a rejoining one has both on its disk.
      hostPublicKey: kind === 'join' ? Buffer.from(this.options.setup.sshHostPublicKey().blob) : Buffer.alloc(0),
    };
  }

  private async attempt(address: string, kind: JoinKind, hello: JoinHello, signal: AbortSignal): Promise<Attempt> {
    const client = new JoinServiceClient(address, await createAttestedClientCredentials(), attestedChannelOptions);
    const call = kind === 'join' ? client.issueJoinTicket() : client.issueRejoinTicket();
    const abort = () => call.cancel();
    signal.addEventListener('abort', abort, { once: true });
    try {
      const session = await attestedClient(call, joinClientAdapter, {
        purpose: kind,
        peer: `the join service at ${address}`,
        issuer: this.options.issuer,
        bound: joinHelloBoundFields(hello),
        hello: { kind: { $case: 'hello', value: hello } },
        timeoutMs: this.options.stepTimeoutMs,
      });
      session.channel.end();
      return { ticket: session.secrets, ownKey: session.publicKey };
    } catch (err) {
      const refusal = peerRefusal(err);
      return refusal !== undefined ? { refused: refusal } : { unreachable: describeError(err) };
    } finally {
      signal.removeEventListener('abort', abort);
      client.close();
    }
  }

  /** Opens the disk with a rejoin ticket's key under the provisional lock; a key the disk refuses gives the lock back. */
  private async unlockWith(token: LockToken, sealed: Uint8Array, address: string): Promise<boolean> {
    try {
      await this.options.setup.openStateDisk(
        token,
        decodeMessage(RejoinTicket, sealed, 'The rejoin ticket').stateDiskKey,
      );
      return true;
    } catch (err) {
      this.options.lock.release(token);
      const reason = `the rejoin ticket from ${address} does not unlock the state disk: ${describeError(err)}`;
      this.logger.error('rejoin ticket not used', { reason });
      this.report('refused', reason);
      return false;
    }
  }

  /** Uses a ticket; the node holds the lock. A failure here leaves the node `failed` (it cannot take another ticket). */
  private async complete(kind: JoinKind, token: LockToken, sealed: Uint8Array): Promise<void> {
    const { status, node } = this.options;
    status.set('joining', {}, token);
    try {
      const clusterId =
        kind === 'join'
          ? await this.join(token, decodeMessage(JoinTicket, sealed, 'The join ticket'))
          : await this.rejoin(token, decodeMessage(RejoinTicket, sealed, 'The rejoin ticket'));
      status.set('joined', { clusterId }, token);
      this.logger.info(`${kind === 'join' ? 'joined' : 'rejoined'} the cluster`, {
        clusterId: Buffer.from(clusterId).toString('hex'),
        role: node.role,
      });
    } catch (err) {
      const reason = describeError(err);
      status.set('failed', { reason }, token);
      this.logger.error(`${kind} failed after the ticket arrived`, { reason });
    }
  }

  private async join(token: LockToken, ticket: JoinTicket): Promise<Uint8Array> {
    const { setup, node, backend } = this.options;
    const clusterId = deriveClusterId(ticket.measurementSecret, ticket.measurementSalt);
    await setup.extendClusterPcr(token, clusterId);
    await setup.openStateDisk(token, ticket.stateDiskKey);
    this.options.status.setKubernetesVersion(ticket.kubernetesVersion);
    const kubeletKey = Buffer.from(this.csr!.privateKeyPem);
    const kubeletCert = Buffer.from(pem('CERTIFICATE', ticket.kubeletCert));
    // Files of their own, written together (each is atomic: its own temporary file, fsync and rename).
    await Promise.all([
      setup.writeClusterRecord(token, {
        origin: 'join',
        role: node.role,
        clusterId: Buffer.from(clusterId).toString('hex'),
        measurementSalt: Buffer.from(ticket.measurementSalt).toString('hex'),
        kubernetesVersion: ticket.kubernetesVersion,
      }),
      setup.recordClusterEntry(token, 'join'),
      setup.writeNodeFile(token, KUBELET_KEY_FILE, kubeletKey),
      setup.writeNodeFile(token, KUBELET_CERT_FILE, kubeletCert),
      // The emergency SSH CA the node's SSH server trusts (docs/workflows/emergency-ssh.md); a join service of an
      // older build sends none.
      ticket.sshCaPublicKey.length > 0 && setup.writeNodeFile(token, NODE_SSH_CA_FILE, ticket.sshCaPublicKey),
      // The host key this join request carried, with the certificate the join service gave it.
      ticket.hostCertificate.length > 0 && setup.writeSshHostIdentity(token, ticket.hostCertificate),
    ]);
    const isControlPlane = node.role === 'control-plane';
    const kubernetes = await backend.join({
      nodeName: node.name,
      nodeIp: node.ip,
      apiServerEndpoint: ticket.apiServerEndpoint,
      token: ticket.token,
      discoveryTokenCaCertHash: ticket.discoveryTokenCaCertHash,
      kubeletCert,
      kubeletKey,
      isControlPlane,
      controlPlaneFiles: Object.fromEntries(ticket.controlPlaneFiles.map((f) => [f.name, f.data])),
      kubernetesVersion: ticket.kubernetesVersion,
      ...(node.providerId ? { providerId: node.providerId } : {}),
      log: this.logger.child({ component: `kubernetes-${backend.name}` }),
    });
    this.logger.info(kubernetes.message);
    if (isControlPlane) {
      const pki = loadClusterPki(
        Object.fromEntries(ticket.controlPlaneFiles.map((f) => [f.name, f.data])),
        "the join ticket's control-plane files",
      );
      await setup.joinStore(token, pki, ticket.storeEndpoints);
      const service = await setup.startJoinService(token);
      this.logger.info('hosting a join service', { address: `${node.ip}:${service.port}` });
    }
    return clusterId;
  }

  private async rejoin(token: LockToken, ticket: RejoinTicket): Promise<Uint8Array> {
    const { clusterId, record } = await this.options.setup.resume(
      token,
      ticket.stateDiskKey,
      ticket.measurementSecret,
      {
        hostJoinService: this.options.node.role === 'control-plane',
        how: 'rejoin',
      },
    );
    this.options.status.setKubernetesVersion(record.kubernetesVersion ?? '');
    return clusterId;
  }
}
