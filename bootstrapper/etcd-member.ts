/**
 * The etcd member of a `none` control-plane node (Debian's etcd-server), stacked on the control planes as kubeadm
 * stacks it: certificates for clients and peers from the cluster's etcd CA (made by this node from the CA in the
 * PKI), data below the encrypted state disk's mount point, the log beside the node's own.
 *
 *   init    create():  a one-member cluster (--initial-cluster-state new), on ALONE_TIMEOUTS when the provider
 *                      knows of no other control plane, then wait until it is healthy
 *   peers   beforePeerJoins(): before a control plane is told where to join, a member still on ALONE_TIMEOUTS starts
 *                      again on PEER_TIMEOUTS (see there)
 *   join    join():    MemberAdd as a learner through the ticket's endpoints → start with every member named
 *                      (--initial-cluster-state existing) → MemberPromote once the learner caught up
 *   reboot  resume():  start from the data directory (etcd ignores the initial-cluster flags then); no wait for a
 *                      quorum, which comes back as the other control planes do
 *
 * Access control (lib/cluster-store/etcd-access.ts): create() turns etcd's authentication on once the first member
 * is healthy. The member's own client (its join service, its upgrade follower) acts as the join service's user;
 * init's write of the join configuration and a joining member's MemberAdd/MemberPromote use an admin certificate
 * made in memory from the etcd CA, valid for ADMIN_CERTIFICATE_LIFETIME_MS and never written to disk.
 *
 * The process is a child of the bootstrapper and carries its owner mark, so the local provider stops it with the
 * node. Start-up failures name etcd's log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Etcd3 } from 'etcd3';
import { ENTRY } from '../lib/cluster-store/entries.js';
import { enableAccessControl, ETCD_ADMIN_USER, ETCD_JOIN_SERVICE_USER } from '../lib/cluster-store/etcd-access.js';
import { addLearner, promoteLearner } from '../lib/cluster-store/etcd-members.js';
import {
  ETCD_CLIENT_PORT,
  ETCD_PEER_PORT,
  EtcdClusterStore,
  etcdClient,
  preloadEtcdClient,
  STORE_PREFIX,
  type EtcdConnection,
} from '../lib/cluster-store/etcd.js';
import type { ClusterStore } from '../lib/cluster-store/types.js';
import type { Clock } from '../lib/clock.js';
import { UserError } from '../lib/errors.js';
import { canConnect } from '../lib/process.js';
import type { Logger } from '../lib/logging/index.js';
import { issueEtcdClientCertificate, issueEtcdMemberCertificates, type ClusterPki } from '../lib/pki/cluster-pki.js';
import { writeFileAtomic } from '../lib/workspace/atomic-file.js';
import { readRegularFile, SIZE_LIMITS } from '../lib/workspace/regular-file.js';
import type { ClusterStoreHost, StoreCredentials } from './store-host.js';

/** How long a stopping member may take before it is killed (see close()). */
const STOP_GRACE_MS = 1000;

/**
 * Raft's timing (--heartbeat-interval, --election-timeout, ms) of a member with peers. Local clusters share two
 * cores: a quick election after a failure, without flapping under load.
 */
const PEER_TIMEOUTS = { heartbeatMs: 100, electionMs: 1000 } as const;
/**
 * The timing of the member init creates when it is the only one. A new one-member cluster elects itself only once
 * its first election timeout has passed: etcd fast-forwards all ticks but one, and raft draws that timeout from
 * [T, 2T), so the wait is one tick to T: 0.1-1 s on PEER_TIMEOUTS, on the path of every init; 20-100 ms here.
 * Alone, a member cannot lose an election or its quorum, so short timeouts change nothing else; with peers they
 * would make the cluster flap under load. So init uses them only when the provider lists no other control plane (a
 * cluster created with several starts on PEER_TIMEOUTS at once), the member starts again on PEER_TIMEOUTS before a
 * control plane added later is told where to join (beforePeerJoins), and a reboot starts every member on
 * PEER_TIMEOUTS. The election timeout is 5 ticks, the least etcd allows: ticks cost CPU for as long as the member
 * runs (an idle member on 10 ms ticks used twice the CPU of one on 100 ms ticks).
 */
const ALONE_TIMEOUTS = { heartbeatMs: 20, electionMs: 100 } as const;
type RaftTimeouts = typeof PEER_TIMEOUTS | typeof ALONE_TIMEOUTS;

/** Lifetime of the admin certificate a control plane makes in memory for init's writes or a membership change. */
export const ADMIN_CERTIFICATE_LIFETIME_MS = 10 * 60_000;

export interface EtcdMemberOptions {
  /** The node's name: the member's name. */
  name: string;
  /** The node's address: the member serves clients and peers there. */
  ip: string;
  /** The member's folder on the state disk: pki/ and data/. */
  dir: string;
  /** etcd's log (outside the state disk, so it can be read without the key). */
  logFile: string;
  clock: Clock;
  logger: Logger;
  binary?: string;
  /** Longest wait for the member to become healthy. */
  startTimeoutMs?: number;
}

const FILES = {
  ca: 'pki/ca.crt',
  serverCert: 'pki/server.crt',
  serverKey: 'pki/server.key',
  peerCert: 'pki/peer.crt',
  peerKey: 'pki/peer.key',
  clientCert: 'pki/client.crt',
  clientKey: 'pki/client.key',
  data: 'data',
} as const;

export class EtcdMember implements ClusterStoreHost {
  private process: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  /** The create() under way: init starts it early and awaits it later; a retried init in between shares it. */
  private creating: Promise<void> | undefined;
  /** The timing the running member was started with. */
  private timeouts: RaftTimeouts = PEER_TIMEOUTS;
  /** The restart of beforePeerJoins() while it runs; control planes joining at once share it. */
  private leavingAlone: Promise<void> | undefined;

  constructor(private readonly options: EtcdMemberOptions) {}

  /** Loads the etcd client's code in the background (lib/cluster-store/etcd.ts preloadEtcdClient). */
  preload(): void {
    preloadEtcdClient();
  }

  get clientUrl(): string {
    return `https://${this.options.ip}:${ETCD_CLIENT_PORT}`;
  }

  get peerUrl(): string {
    return `https://${this.options.ip}:${ETCD_PEER_PORT}`;
  }

  create(pki: ClusterPki, options: { alone?: boolean } = {}): Promise<void> {
    this.creating ??= this.createMember(pki, options.alone ? ALONE_TIMEOUTS : PEER_TIMEOUTS).finally(
      () => (this.creating = undefined),
    );
    return this.creating;
  }

  private async createMember(pki: ClusterPki, timeouts: RaftTimeouts): Promise<void> {
    if (this.process) return;
    await this.writeCertificates(pki);
    await this.start({ initialCluster: `${this.options.name}=${this.peerUrl}`, state: 'new' }, timeouts);
    // One client (one TLS connection) for the wait and the access control: authentication is not on yet.
    const admin = await etcdClient(this.adminConnection(pki, [this.clientUrl]));
    try {
      await this.waitHealthy(admin);
      await enableAccessControl(admin);
    } finally {
      admin.close();
    }
  }

  async join(pki: ClusterPki, endpoints: string[]): Promise<void> {
    if (this.process) return;
    if (endpoints.length === 0)
      throw new UserError('The join ticket names no cluster store member to join through.', {
        hint: 'The join service is older than this node; update it.',
      });
    await this.writeCertificates(pki);
    if (await this.hosted()) {
      // A join retried after the member started once: it is a member already.
      await this.start();
    } else {
      const connection = this.adminConnection(pki, endpoints);
      const client = await etcdClient(connection);
      try {
        const { member, members } = await addLearner(client, this.peerUrl);
        const initialCluster = members
          .filter((m) => m.id === member.id || m.name !== '')
          .map((m) => `${m.id === member.id ? this.options.name : m.name}=${m.peerUrls[0]}`)
          .join(',');
        await this.start({ initialCluster, state: 'existing' });
        // A learner serves no reads: it is healthy once promoted, which etcd allows when it has caught up.
        await promoteLearner(client, connection, member.id, {
          timeoutMs: this.options.startTimeoutMs ?? 30_000,
          exited: () => this.exitedEarly(),
        });
        await this.waitHealthy();
      } finally {
        client.close();
      }
    }
    this.options.logger.info('joined the cluster store as an etcd member', {
      member: this.options.name,
      clientUrl: this.clientUrl,
    });
  }

  /**
   * Called before this node's join service tells a control plane where to join the store: a member still running on
   * ALONE_TIMEOUTS starts again on PEER_TIMEOUTS (its data stays; the store is away for about a second), so that no
   * member with peers runs on the short ones. Does nothing otherwise.
   */
  beforePeerJoins(): Promise<void> {
    if (!this.process || this.timeouts === PEER_TIMEOUTS) return Promise.resolve();
    this.leavingAlone ??= (async () => {
      this.options.logger.info('etcd member starts again with the timeouts of a member with peers', {
        member: this.options.name,
      });
      await this.close();
      await this.start();
      await this.waitHealthy();
    })().finally(() => (this.leavingAlone = undefined));
    return this.leavingAlone;
  }

  async hosted(): Promise<boolean> {
    return fs.access(path.join(this.options.dir, FILES.data, 'member')).then(
      () => true,
      () => false,
    );
  }

  async resume(): Promise<void> {
    if (this.process) return;
    await this.start();
  }

  async open(): Promise<ClusterStore> {
    return EtcdClusterStore.connect(await this.connection());
  }

  async openAsAdmin(pki: ClusterPki): Promise<ClusterStore> {
    return EtcdClusterStore.connect(this.adminConnection(pki, [this.clientUrl]));
  }

  async adminCredentials(pki: ClusterPki): Promise<StoreCredentials> {
    const admin = issueEtcdClientCertificate(pki, { commonName: ETCD_ADMIN_USER, clock: this.options.clock });
    return {
      backend: 'etcd',
      endpoints: [this.clientUrl],
      caCert: pki.files['etcd/ca.crt'],
      clientCert: admin.cert,
      clientKey: admin.key,
    };
  }

  async close(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    // SIGTERM lets a leader hand its leadership on, which takes a few heartbeats while its peers run; when they stop
    // too (a whole control plane going down), etcd waits for them for seconds. Past STOP_GRACE_MS it is killed: etcd
    // is made to survive that (its log is synced before it acknowledges), and its data stays mounted until it is gone.
    child.kill('SIGTERM');
    const killed = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(killed);
  }

  /** An admin connection with a certificate made now, in memory, valid for minutes. */
  private adminConnection(pki: ClusterPki, endpoints: string[]): EtcdConnection {
    const admin = issueEtcdClientCertificate(pki, {
      commonName: ETCD_ADMIN_USER,
      clock: this.options.clock,
      lifetimeMs: ADMIN_CERTIFICATE_LIFETIME_MS,
    });
    return { endpoints, caCert: pki.files['etcd/ca.crt'], clientCert: admin.cert, clientKey: admin.key };
  }

  /** This node's client connection to its own member (as the join service's user). */
  private async connection(): Promise<EtcdConnection> {
    const read = async (name: string) =>
      (
        await readRegularFile(path.join(this.options.dir, name), {
          what: `the etcd member's ${name}`,
          maxBytes: SIZE_LIMITS.stateDiskFile,
        })
      ).toString('utf8');
    const [caCert, clientCert, clientKey] = await Promise.all([
      read(FILES.ca),
      read(FILES.clientCert),
      read(FILES.clientKey),
    ]);
    return { endpoints: [this.clientUrl], caCert, clientCert, clientKey };
  }

  private async writeCertificates(pki: ClusterPki): Promise<void> {
    const { server, peer } = issueEtcdMemberCertificates(pki, {
      name: this.options.name,
      ips: [this.options.ip],
      clock: this.options.clock,
    });
    const client = issueEtcdClientCertificate(pki, { commonName: ETCD_JOIN_SERVICE_USER, clock: this.options.clock });
    const files: [string, string][] = [
      [FILES.ca, pki.files['etcd/ca.crt']],
      [FILES.serverCert, server.cert],
      [FILES.serverKey, server.key],
      [FILES.peerCert, peer.cert],
      [FILES.peerKey, peer.key],
      [FILES.clientCert, client.cert],
      [FILES.clientKey, client.key],
    ];
    // Seven files of their own, written together (each atomic), before etcd can start.
    await Promise.all(
      files.map(([name, content]) => writeFileAtomic(path.join(this.options.dir, name), content, { mode: 0o600 })),
    );
  }

  private async start(
    initial?: { initialCluster: string; state: 'new' | 'existing' },
    timeouts: RaftTimeouts = PEER_TIMEOUTS,
  ): Promise<void> {
    const { dir, ip, name } = this.options;
    const file = (f: string) => path.join(dir, f);
    await fs.mkdir(file(FILES.data), { recursive: true, mode: 0o700 });
    const args = [
      `--name=${name}`,
      `--data-dir=${file(FILES.data)}`,
      `--listen-client-urls=${this.clientUrl}`,
      `--advertise-client-urls=${this.clientUrl}`,
      `--listen-peer-urls=${this.peerUrl}`,
      `--initial-advertise-peer-urls=${this.peerUrl}`,
      `--trusted-ca-file=${file(FILES.ca)}`,
      `--cert-file=${file(FILES.serverCert)}`,
      `--key-file=${file(FILES.serverKey)}`,
      '--client-cert-auth',
      `--peer-trusted-ca-file=${file(FILES.ca)}`,
      `--peer-cert-file=${file(FILES.peerCert)}`,
      `--peer-key-file=${file(FILES.peerKey)}`,
      '--peer-client-cert-auth',
      `--heartbeat-interval=${timeouts.heartbeatMs}`,
      `--election-timeout=${timeouts.electionMs}`,
      // etcd's strict check refuses every membership change until the leader has been connected to all voters for
      // 5 s, so each control plane that joins right after another waited 5 s. Members are only ever added as
      // learners (no effect on the quorum); the checks that matter are ours (lib/cluster-store/etcd-members.ts): a
      // promotion keeps a quorum of started voters, a removal a quorum of healthy ones.
      '--strict-reconfig-check=false',
      '--logger=zap',
      '--log-level=warn',
      ...(initial ? [`--initial-cluster=${initial.initialCluster}`, `--initial-cluster-state=${initial.state}`] : []),
    ];
    const log = await fs.open(this.options.logFile, 'a', 0o600);
    try {
      const child = spawn(this.options.binary ?? 'etcd', args, { stdio: ['ignore', log.fd, log.fd] });
      this.exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', (err: NodeJS.ErrnoException) =>
          reject(
            err.code === 'ENOENT'
              ? new UserError('etcd is not installed on this node.', {
                  hint: 'Install etcd-server (npm run setup does).',
                })
              : err,
          ),
        );
      });
      this.process = child;
      this.timeouts = timeouts;
      this.options.logger.info('etcd member started', {
        member: name,
        address: ip,
        pid: child.pid,
        initial: initial?.state ?? 'from its data directory',
      });
    } finally {
      await log.close();
    }
  }

  /** The member's process ended (a start that failed): a UserError naming etcd's log, else undefined. */
  private exitedEarly(): UserError | undefined {
    if (this.process && this.process.exitCode === null && this.process.signalCode === null) return undefined;
    return new UserError(`The etcd member of ${this.options.name} exited while starting.`, {
      hint: `See its log: ${this.options.logFile}`,
    });
  }

  /**
   * Waits until the member answers a quorum read, or fails naming etcd's log. `through`: the client to ask with
   * (default: one of the join service's user, made here).
   */
  private async waitHealthy(through?: Etcd3): Promise<void> {
    const timeoutMs = this.options.startTimeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    const waitOrGiveUp = async (ms: number) => {
      const exited = this.exitedEarly();
      if (exited) throw exited;
      if (Date.now() > deadline) {
        throw new UserError(
          `The etcd member of ${this.options.name} did not become healthy within ${Math.round(timeoutMs / 1000)} s.`,
          { hint: `See its log: ${this.options.logFile}` },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, ms));
    };
    // First the client port (a refused connect costs next to nothing): a gRPC client whose first connection was
    // refused tries again only after its reconnect backoff (100 ms), and etcd listens some 50 ms before it serves.
    // A connection made then waits until etcd serves it.
    const { hostname, port } = new URL(this.clientUrl);
    while (!(await canConnect({ host: hostname, port: Number(port) }))) await waitOrGiveUp(10);
    const client = through ?? (await etcdClient({ ...(await this.connection()), timeoutMs: 1000 }));
    try {
      for (;;) {
        try {
          // A linearizable read the join service's user may make (with access control on, it may read nothing else).
          await client.get(`${STORE_PREFIX}${ENTRY.cluster}`).exec();
          return;
        } catch {
          await waitOrGiveUp(25);
        }
      }
    } finally {
      if (!through) client.close();
    }
  }
}
