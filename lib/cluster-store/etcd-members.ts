/**
 * The etcd cluster's membership: who is a member, adding a control plane as a learner and promoting it once it
 * caught up (etcd's safe way to grow a cluster), removing one that is replaced, and each member's health for
 * `constellation status`. Member names are node names; peer URLs https://<node IP>:2380.
 */
import type { Etcd3 } from 'etcd3';
import type { Clock, Sleep } from '../clock.js';
import { pollUntil } from '../poll.js';
import { etcdClient, etcdErrorDetail, unavailableOnError, type EtcdConnection } from './etcd.js';
import { StoreUnavailableError } from './types.js';

export interface EtcdMember {
  id: string;
  /** Empty for a member that was added but has not started yet. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

export interface MemberHealth extends EtcdMember {
  healthy: boolean;
  /** Whether this member is the raft leader. */
  leader: boolean;
  /** Why it is unhealthy. */
  reason?: string;
}

export interface StoreHealth {
  members: MemberHealth[];
  /** Voting members that answer, and how many are needed for a quorum. */
  healthyVoters: number;
  voters: number;
  quorum: boolean;
}

export async function listMembers(client: Etcd3): Promise<EtcdMember[]> {
  const response = await unavailableOnError(() => client.cluster.memberList({ linearizable: true }));
  return response.members.map(toMember);
}

/**
 * Adds a learner with this peer URL (an existing one with the same URL is kept); returns it and every member.
 * etcd takes one learner at a time: while another control plane is joining, this asks again until `timeoutMs`.
 */
export async function addLearner(
  client: Etcd3,
  peerUrl: string,
  options: { timeoutMs?: number; sleep?: Sleep; clock?: Clock } = {},
): Promise<{ member: EtcdMember; members: EtcdMember[] }> {
  let refusal: unknown;
  return pollUntil(
    async () => {
      const existing = (await listMembers(client)).find((m) => m.peerUrls.includes(peerUrl));
      if (existing) return { member: existing, members: await listMembers(client) };
      try {
        const response = await client.cluster.memberAdd({ peerURLs: [peerUrl], isLearner: true });
        return { member: toMember(response.member), members: response.members.map(toMember) };
      } catch (err) {
        refusal = err;
        return undefined;
      }
    },
    {
      timeoutMs: options.timeoutMs ?? 60_000,
      // Jittered, so control planes that join at once do not ask in step.
      intervalMs: () => 100 + Math.random() * 200,
      clock: options.clock,
      sleep: options.sleep,
      onTimeout: () => {
        throw new StoreUnavailableError(`this node could not be added as a learner: ${etcdErrorDetail(refusal)}`, {
          cause: refusal,
        });
      },
    },
  );
}

/**
 * Promotes a learner to a voting member. etcd refuses while the learner lags behind the leader; this asks again
 * until it is in sync or `timeoutMs` passed, or until `exited` reports that the learner's process ended. It also waits
 * while the voters that have started (the learner counts as one) would be no quorum of the grown cluster: the check
 * etcd's strict reconfiguration mode makes, which the members run without (bootstrapper/etcd-member.ts).
 *
 * The promotion is asked of the leader itself, on its client URLs. A follower passes a MemberPromote on to the leader
 * over the peer API without the caller's user, and with access control on (ours) the leader refuses it ("auth: user
 * name is empty"; etcd issue 20757, fixed in later 3.5 and 3.6 releases, not in the 3.4 the nodes run). The follower
 * retries that in a busy loop until the call's deadline, so each promotion that went to a follower cost a whole
 * deadline (3 s) and loaded both members. `client` reaches the members the learner was added through, over
 * `connection`; the leader is the one they name, reached with the same credentials.
 */
export async function promoteLearner(
  client: Etcd3,
  connection: EtcdConnection,
  id: string,
  options: { timeoutMs?: number; sleep?: Sleep; clock?: Clock; exited?: () => Error | undefined } = {},
): Promise<void> {
  let last: unknown;
  let leader: { urls: string; client: Etcd3 } | undefined;
  try {
    await pollUntil(
      async () => {
        const exited = options.exited?.();
        if (exited) throw exited;
        try {
          const members = await listMembers(client);
          if (members.some((m) => m.id === id && !m.isLearner)) return true; // promoted already (a retried join)
          const refusal = promotionRefusal(members);
          if (refusal) throw new Error(refusal);
          const leaderId = String((await unavailableOnError(() => client.maintenance.status())).leader);
          const urls = members.find((m) => m.id === leaderId)?.clientUrls ?? [];
          if (urls.length === 0) throw new Error(`the members name no leader with a client URL (leader ${leaderId})`);
          if (leader?.urls !== urls.join(',')) {
            leader?.client.close();
            leader = { urls: urls.join(','), client: await etcdClient({ ...connection, endpoints: urls }) };
          }
          await leader.client.cluster.memberPromote({ ID: id });
          return true;
        } catch (err) {
          const message = String((err as Error).message);
          if (/not a learner/i.test(message)) return true; // promoted already (a retried join)
          last = err;
          return undefined;
        }
      },
      {
        timeoutMs: options.timeoutMs ?? 30_000,
        intervalMs: 100,
        clock: options.clock,
        sleep: options.sleep,
        onTimeout: () => {
          throw new StoreUnavailableError(`the learner ${id} could not be promoted: ${etcdErrorDetail(last)}`, {
            cause: last,
          });
        },
      },
    );
  } finally {
    leader?.client.close();
  }
}

/** Why promoting a learner now would leave the started voters (the learner one of them) no quorum; else undefined. */
export function promotionRefusal(members: EtcdMember[]): string | undefined {
  const voters = members.filter((m) => !m.isLearner);
  const started = voters.filter((m) => m.name !== '').length;
  return started + 1 > (voters.length + 1) / 2
    ? undefined
    : `only ${started} of ${voters.length} voting members have started`;
}

/** Why removing member `name` would leave the healthy voters no quorum of the smaller cluster; else undefined. */
export function removalRefusal(health: StoreHealth, name: string): string | undefined {
  const member = health.members.find((m) => m.name === name);
  if (!member || member.isLearner) return undefined;
  const voters = health.voters - 1;
  const healthy = health.healthyVoters - (member.healthy ? 1 : 0);
  if (healthy > voters / 2) return undefined;
  const down = health.members.filter((m) => !m.isLearner && !m.healthy && m.name !== name).map((m) => m.name || m.id);
  return `removing ${name} would leave ${healthy} healthy of ${voters} voting members: no quorum (down: ${down.join(', ') || 'none'})`;
}

/**
 * Hands the leadership from member `name` to another healthy voter before `name` leaves (etcd's MoveLeader, asked of
 * the leader). Removing the leader itself leaves the cluster without one until an election timeout passed, and
 * every read in between fails; a transfer takes a few heartbeats. Nothing when `name` is not the leader.
 */
export async function moveLeaderAway(connection: EtcdConnection, health: StoreHealth, name: string): Promise<void> {
  const leader = health.members.find((m) => m.name === name && m.leader);
  const successor = health.members.find((m) => m.name !== name && !m.isLearner && m.healthy);
  if (!leader || !successor) return;
  const client = await etcdClient({ ...connection, endpoints: leader.clientUrls });
  try {
    await unavailableOnError(() => client.maintenance.moveLeader({ targetID: successor.id }));
  } finally {
    client.close();
  }
}

/** Removes the member of that node name (or peer URL); nothing when it is not a member. */
export async function removeMember(client: Etcd3, nameOrPeerUrl: string): Promise<boolean> {
  const member = (await listMembers(client)).find(
    (m) => m.name === nameOrPeerUrl || m.peerUrls.includes(nameOrPeerUrl),
  );
  if (!member) return false;
  await unavailableOnError(() => client.cluster.memberRemove({ ID: member.id }));
  return true;
}

/** Every member's health, each asked on its own client URL, and whether the voters have a quorum. */
export async function storeHealth(
  connection: EtcdConnection,
  options: { timeoutMs?: number } = {},
): Promise<StoreHealth> {
  // The member list from the first endpoint that answers (the others may be the members that are down).
  let members: EtcdMember[] | undefined;
  let lastError: unknown;
  for (const endpoint of connection.endpoints) {
    const client = await etcdClient({ ...connection, endpoints: [endpoint], timeoutMs: options.timeoutMs ?? 2000 });
    try {
      members = await listMembers(client);
      break;
    } catch (err) {
      lastError = err;
    } finally {
      client.close();
    }
  }
  if (!members) throw lastError ?? new StoreUnavailableError('no endpoint to ask');
  const health = await Promise.all(
    members.map(async (member): Promise<MemberHealth> => {
      if (member.clientUrls.length === 0)
        return { ...member, healthy: false, leader: false, reason: 'added, not started yet' };
      const one = await etcdClient({
        ...connection,
        endpoints: member.clientUrls,
        timeoutMs: options.timeoutMs ?? 2000,
      });
      try {
        const status = await one.maintenance.status();
        // A member that lost the leader cannot serve linearizable reads; a quorum read proves it can.
        await one.get('health').exec();
        return { ...member, healthy: true, leader: status.leader === status.header.member_id };
      } catch (err) {
        return { ...member, healthy: false, leader: false, reason: etcdErrorDetail(err) };
      } finally {
        one.close();
      }
    }),
  );
  const voters = health.filter((m) => !m.isLearner);
  const healthyVoters = voters.filter((m) => m.healthy).length;
  return { members: health, healthyVoters, voters: voters.length, quorum: healthyVoters > voters.length / 2 };
}

function toMember(m: {
  ID: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
}): EtcdMember {
  return {
    id: String(m.ID),
    name: m.name,
    peerUrls: m.peerURLs,
    clientUrls: m.clientURLs,
    isLearner: Boolean(m.isLearner),
  };
}
