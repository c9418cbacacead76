/**
 * The join client (docs/design.md#nodes), running on every node in parallel with the init server until the node lock is
 * taken. It finds a join service through the provider's metadata (the load balancer first, then the other
 * control-plane nodes), attests itself with a JoinHello bound into its document, and on a ticket signed with the
 * cluster's join-service identity key (from the metadata; docs/join-service.md) takes the lock, extends PCR 15, formats (join) or unlocks (rejoin) its state disk and joins Kubernetes; a control-plane
 * node then hosts a join service too.
 *
 * A join service that cannot be reached is retried quietly (the cluster may not be up yet); one that refuses
 * the node (its Failure names the PCR that differs) puts the node in state `refused` with that reason, and it
 * keeps asking, with a capped backoff, since a fixed node or updated measurements may be accepted later.
 */
import { attestedChannelOptions, attestedClient, createAttestedClientCredentials, decodeMessage, joinClientAdapter, joinHelloBoundFields } from '../lib/atls/index.js';
import { deriveClusterId, ticketSignatureValid } from '../lib/kms/index.js';
import { loadClusterPki, pem } from '../lib/pki/cluster-pki.js';
import { JoinServiceClient, JoinTicket, RejoinTicket, SignedTicket, type JoinHello } from '../proto/gen/constellation/join.js';
import type { NodeMetadata } from '../providers/contract.js';
import { realSleep, type Sleep } from '../lib/clock.js';
import type { Logger } from '../lib/logging/index.js';
import type { KubernetesBackend } from './kubernetes/backend.js';
import type { NodeRoleOptions } from './node-role.js';
import { describeError, peerRefusal } from './errors.js';
import { withPort } from '../lib/addresses.js';
import { NO_QUORUM_MESSAGE } from '../lib/cluster-store/types.js';
import { createKubeletCsr, type KubeletCsr } from './kubelet-csr.js';

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
}

type Attempt = { ticket: Uint8Array; ownKey: Uint8Array } | { refused: string } | { unreachable: string };

/** Files of the kubelet's key and certificate on the state disk. */
export const KUBELET_KEY_FILE = 'kubelet/kubelet.key';
export const KUBELET_CERT_FILE = 'kubelet/kubelet.crt';

export class JoinClient {
  private readonly logger: Logger;
  private csr: KubeletCsr | undefined;

  constructor(private readonly options: JoinClientOptions) {
    this.logger = options.logger.child({ component: 'join' });
  }

  /** Asks until the node holds a ticket and has used it, until the lock is taken by init, or until `signal` aborts. */
  async run(kind: JoinKind, signal: AbortSignal): Promise<void> {
    const { lock, status } = this.options;
    const retry = this.options.retry ?? DEFAULT_RETRY;
    const hello = await this.hello(kind);
    let wait = retry.initialMs;
    let round = 0;
    while (!signal.aborted && !lock.locked) {
      round++;
      let refused = false;
      let noQuorum: string | undefined;
      const endpoints = await this.discover();
      if (endpoints.length === 0 && round === 1) this.logger.info('no join service endpoint known yet; asking the metadata again');
      for (const address of endpoints) {
        if (signal.aborted || lock.locked) return;
        const attempt = await this.attempt(address, kind, hello, signal);
        if ('ticket' in attempt) {
          const ticket = await this.genuine(attempt.ticket, attempt.ownKey, kind, address);
          if (!ticket) continue;
          status.attested('accepted', `the join service at ${address}`);
          // A rejoin ticket's key must open the disk before the node commits to it (a wrong one changes nothing).
          if (kind === 'rejoin' && !(await this.unlockWith(ticket, address))) {
            refused = true;
            break;
          }
          if (!lock.tryLock('join')) {
            this.logger.info(`${kind} ticket received, but this node was initialized meanwhile; the ticket is not used`);
            return;
          }
          await this.complete(kind, ticket);
          return;
        }
        if ('refused' in attempt && attempt.refused.startsWith(NO_QUORUM_MESSAGE)) {
          // Not a verdict on this node: the control plane cannot decide now. Ask the others, and again soon.
          if (noQuorum !== attempt.refused) this.logger.warn(`${kind}: the join service cannot answer`, { address, reason: attempt.refused });
          noQuorum = attempt.refused;
          continue;
        }
        if ('refused' in attempt) {
          if (status.get().reason !== attempt.refused) this.logger.warn(`${kind} refused by the join service`, { address, reason: attempt.refused });
          status.set('refused', { reason: attempt.refused });
          status.attested('refused', `the join service at ${address}`, { reason: attempt.refused });
          refused = true;
          break;
        }
        this.logger.debug('join service not reachable', { address, reason: attempt.unreachable, round });
      }
      if (!refused && kind === 'rejoin') this.noJoinServiceAnswers(noQuorum);
      else if (!refused && noQuorum) status.set('waiting', { reason: noQuorum });
      try {
        await (this.options.sleep ?? realSleep)(wait, signal);
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
      status.set('awaiting-recovery', { reason: `${why}: run \`constellation recover\` if control-plane nodes rebooted` });
    } else {
      status.set('waiting', { reason: `${why} yet: it rejoins once the control plane is back` });
    }
  }

  /**
   * The ticket's bytes when it comes from a genuine join service of this node's cluster: signed with the cluster's
   * join-service identity key (whose public half the provider's metadata holds) over this exchange's ephemeral key
   * of the node. Anyone can listen on a join service's address and seal a ticket to this node's key; only a
   * control plane of the cluster holds that key (a worker's ticket does not carry it, a fresh node has none).
   */
  private async genuine(sealed: Uint8Array, ownKey: Uint8Array, kind: JoinKind, address: string): Promise<Uint8Array | undefined> {
    const { ticket, signature } = decodeMessage(SignedTicket, sealed, `The ${kind} ticket`);
    let key: string;
    try {
      key = await this.options.metadata.joinServiceKey();
    } catch (err) {
      this.logger.warn(`${kind} ticket not used: the join-service key cannot be read from the metadata`, { address, reason: describeError(err) });
      return undefined;
    }
    if (key === '') {
      this.logger.warn(`${kind} ticket not used: the metadata holds no join-service key to check it with (a cluster created by an earlier version: create it again)`, { address });
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

  private async unlockWith(sealed: Uint8Array, address: string): Promise<boolean> {
    try {
      await this.options.setup.openStateDisk(decodeMessage(RejoinTicket, sealed, 'The rejoin ticket').stateDiskKey);
      return true;
    } catch (err) {
      const reason = `the rejoin ticket from ${address} does not unlock the state disk: ${describeError(err)}`;
      this.logger.error('rejoin ticket not used', { reason });
      this.options.status.set('failed', { reason });
      return false;
    }
  }

  /** Uses a ticket; the node holds the lock. A failure here leaves the node `failed` (it cannot take another ticket). */
  private async complete(kind: JoinKind, sealed: Uint8Array): Promise<void> {
    const { status, node } = this.options;
    status.set('joining');
    try {
      const clusterId = kind === 'join' ? await this.join(decodeMessage(JoinTicket, sealed, 'The join ticket')) : await this.rejoin(decodeMessage(RejoinTicket, sealed, 'The rejoin ticket'));
      status.set('joined', { clusterId });
      this.logger.info(`${kind === 'join' ? 'joined' : 'rejoined'} the cluster`, { clusterId: Buffer.from(clusterId).toString('hex'), role: node.role });
    } catch (err) {
      const reason = describeError(err);
      status.set('failed', { reason });
      this.logger.error(`${kind} failed after the ticket arrived`, { reason });
    }
  }

  private async join(ticket: JoinTicket): Promise<Uint8Array> {
    const { setup, stateDisk, node, backend } = this.options;
    const clusterId = deriveClusterId(ticket.measurementSecret, ticket.measurementSalt);
    await setup.extendClusterPcr(clusterId);
    await setup.openStateDisk(ticket.stateDiskKey);
    await setup.writeClusterRecord({
      origin: 'join',
      role: node.role,
      clusterId: Buffer.from(clusterId).toString('hex'),
      measurementSalt: Buffer.from(ticket.measurementSalt).toString('hex'),
      kubernetesVersion: ticket.kubernetesVersion,
    });
    await setup.recordClusterEntry('join');
    this.options.status.setKubernetesVersion(ticket.kubernetesVersion);
    const kubeletKey = Buffer.from(this.csr!.privateKeyPem);
    const kubeletCert = Buffer.from(pem('CERTIFICATE', ticket.kubeletCert));
    await stateDisk.writeFile(KUBELET_KEY_FILE, kubeletKey);
    await stateDisk.writeFile(KUBELET_CERT_FILE, kubeletCert);
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
      const pki = loadClusterPki(Object.fromEntries(ticket.controlPlaneFiles.map((f) => [f.name, f.data])), 'the join ticket\'s control-plane files');
      await setup.joinStore(pki, ticket.storeEndpoints);
      const service = await setup.startJoinService();
      this.logger.info('hosting a join service', { address: `${node.ip}:${service.port}` });
    }
    return clusterId;
  }

  private async rejoin(ticket: RejoinTicket): Promise<Uint8Array> {
    const { clusterId, record } = await this.options.setup.resume(ticket.stateDiskKey, ticket.measurementSecret, {
      hostJoinService: this.options.node.role === 'control-plane',
      how: 'rejoin',
    });
    this.options.status.setKubernetesVersion(record.kubernetesVersion ?? '');
    return clusterId;
  }
}
