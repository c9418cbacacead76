/**
 * The node's state machine under races: init against init, and a rejoin ticket against `recover`, on a state disk
 * that answers with real latency (test/support/latency-state-disk.ts), so that each contender is mid-way when the
 * other arrives. And the transition table: moves it lacks, and steps without the lock's token, are refused.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import bcrypt from 'bcryptjs';
import type { InitParams, KubernetesBackend } from '../../bootstrapper/kubernetes/backend.js';
import { InitServer } from '../../bootstrapper/init-server.js';
import { JoinClient, type AskJoinService } from '../../bootstrapper/join-client.js';
import { NodeLock, NodeLockError } from '../../bootstrapper/node-lock.js';
import { CLUSTER_RECORD_FILE, NodeSetup } from '../../bootstrapper/node-setup.js';
import {
  IllegalTransitionError,
  NODE_STATES,
  NODE_TRANSITIONS,
  NodeStatusTracker,
  transitionAllowed,
  type NodeState,
} from '../../bootstrapper/node-status.js';
import { RecoveryServer } from '../../bootstrapper/recovery-server.js';
import type { NodeIdentity } from '../../bootstrapper/node-role.js';
import { MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import type { Issuer } from '../../lib/attestation/types.js';
import { IMAGE_PCRS } from '../../lib/attestation/measurements.js';
import {
  deriveClusterId,
  deriveMeasurementSecret,
  deriveStateDiskKey,
  joinServicePublicKey,
  signTicket,
  type MasterSecret,
} from '../../lib/kms/index.js';
import { createLogger, nullLogger, type Logger } from '../../lib/logging/index.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { InitSecrets } from '../../proto/gen/constellation/init.js';
import { RecoverSecrets } from '../../proto/gen/constellation/recover.js';
import { RejoinTicket, SignedTicket } from '../../proto/gen/constellation/join.js';
import type { NodeMetadata } from '../../providers/contract.js';
import { LatencyStateDisk } from '../support/latency-state-disk.js';
import { MemoryStoreHost } from '../support/memory-store-host.js';

/** Each device step of the fake disk (isFormatted, format, unlock) takes this long. */
const DISK_LATENCY_MS = 80;
const INIT_SECRET = 'a'.repeat(64);
const MASTER: MasterSecret = { key: new Uint8Array(32).fill(1), salt: new Uint8Array(32).fill(2) };
const MEASUREMENT_SALT = new Uint8Array(32).fill(3);
const ZERO_IMAGE_MEASUREMENTS = Object.fromEntries(
  IMAGE_PCRS.map((i) => [String(i), { expected: '00'.repeat(32), warnOnly: false }]),
);
const NODE: NodeIdentity = { name: 'cp-0', ip: '127.0.0.1', role: 'control-plane' };

/** An issuer that must not be used: these tests attest nothing (the CLI and the join service are played by the test). */
const NO_ISSUER = new Proxy(
  {},
  { get: (_t, key) => (key === 'then' ? undefined : () => assert.fail(`issuer.${String(key)} must not be used`)) },
) as Issuer;

/** A backend that counts its inits and takes a moment for each. */
class CountingBackend implements KubernetesBackend {
  readonly name = 'none' as const;
  inits = 0;
  async init(p: InitParams) {
    this.inits++;
    await new Promise((resolve) => setTimeout(resolve, 10));
    return { kubeconfig: p.adminKubeconfig, message: 'ok' };
  }
  async join() {
    return { message: 'ok' };
  }
  tokenSink() {
    return new MemoryTokenSink();
  }
  async upgradeControlPlane(): Promise<never> {
    throw new Error('not in these tests');
  }
}

/** One node's shared parts: its lock, status, setup and what its TPM was asked to extend. */
function nodeParts(disk: LatencyStateDisk, logger: Logger = nullLogger) {
  const lock = new NodeLock();
  const status = new NodeStatusTracker(NODE.name, NODE.role, { lock, logger });
  const extended: number[] = [];
  const store = new MemoryStoreHost();
  const setup = new NodeSetup({
    tpm: {
      pcrBanks: async () => [{ hashAlg: TPM_ALG.SHA256, pcrs: [15] }],
      pcrExtend: async (index) => void extended.push(index),
    },
    stateDisk: disk,
    logger,
    clock: () => new Date(),
    joinService: { validatorDeps: {}, host: '127.0.0.1', port: 0 },
    store,
    lock,
  });
  return {
    lock,
    status,
    setup,
    extended,
    store,
    common: { node: NODE, issuer: NO_ISSUER, lock, status, setup, stateDisk: disk, logger },
  };
}

function metadata(joinServiceKey = ''): NodeMetadata {
  return {
    self: async () => ({ name: NODE.name, providerId: 'test://cp-0', role: NODE.role, vpcIp: NODE.ip }),
    peers: async () => [],
    loadBalancerEndpoint: async () => '127.0.0.1',
    initSecretHash: async () => bcrypt.hashSync(INIT_SECRET, 4),
    joinServiceKey: async () => joinServiceKey,
  };
}

function initSecrets(overrides: Partial<InitSecrets> = {}): InitSecrets {
  return InitSecrets.fromPartial({
    masterKey: Buffer.from(MASTER.key),
    masterSalt: Buffer.from(MASTER.salt),
    initSecret: Buffer.from(INIT_SECRET),
    measurementSalt: Buffer.from(MEASUREMENT_SALT),
    kubernetesVersion: 'v1.31.1',
    attestationConfig: Buffer.from(
      JSON.stringify({ variant: 'local-vtpm', config: { measurements: ZERO_IMAGE_MEASUREMENTS } }),
    ),
    ...overrides,
  });
}

/** A disk a node formatted at init before it rebooted: formatted with the master secret's key, its cluster record on it. */
async function rebootedDisk(): Promise<LatencyStateDisk> {
  const probe = new LatencyStateDisk(0);
  const key = deriveStateDiskKey(MASTER, probe.uuid);
  const disk = new LatencyStateDisk(DISK_LATENCY_MS, key, probe.uuid);
  await disk.unlock(key);
  const clusterId = Buffer.from(deriveClusterId(deriveMeasurementSecret(MASTER), MEASUREMENT_SALT)).toString('hex');
  const record = {
    origin: 'init',
    role: 'control-plane',
    clusterId,
    measurementSalt: Buffer.from(MEASUREMENT_SALT).toString('hex'),
    kubernetesVersion: 'v1.31.1',
  };
  await disk.writeFile(CLUSTER_RECORD_FILE, Buffer.from(JSON.stringify(record)));
  await disk.close();
  disk.opens = 0;
  return disk;
}

/**
 * A join service played by the test: every ask gets a genuine rejoin ticket (signed with the cluster's join-service
 * key, which the metadata publishes) for `disk`; it records who held the node lock when it answered.
 */
function rejoinService(disk: LatencyStateDisk, lock: NodeLock) {
  const seed = new Uint8Array(randomBytes(32));
  const ownKey = new Uint8Array(randomBytes(32));
  const holders: Array<string | undefined> = [];
  const ask: AskJoinService = async (_address, kind) => {
    holders.push(lock.owner);
    const ticket = RejoinTicket.encode({
      stateDiskKey: Buffer.from(deriveStateDiskKey(MASTER, disk.uuid)),
      measurementSecret: Buffer.from(deriveMeasurementSecret(MASTER)),
    }).finish();
    return {
      ticket: SignedTicket.encode({
        ticket: Buffer.from(ticket),
        signature: Buffer.from(signTicket(seed, kind, ownKey, ticket)),
      }).finish(),
      ownKey,
    };
  };
  return { ask, holders, metadata: metadata(Buffer.from(joinServicePublicKey(seed)).toString('base64')) };
}

/** The join client's wait between rounds, as a macrotask (the fake disk's timers run meanwhile), never real time. */
const nextTick = async (_ms: number, signal?: AbortSignal) => {
  await new Promise((resolve) => setImmediate(resolve));
  if (signal?.aborted) throw new Error('aborted');
};

describe('bootstrapper node state machine', () => {
  describe('init against init on a disk with latency', () => {
    it('two concurrent Inits with the right secret get the same result, and the disk is formatted once', async () => {
      const disk = new LatencyStateDisk(DISK_LATENCY_MS);
      const { common, setup, status, extended } = nodeParts(disk);
      const backend = new CountingBackend();
      const init = new InitServer({
        ...common,
        metadata: metadata(),
        backend,
        clock: () => new Date(),
        logTail: () => new Uint8Array(0),
      });
      try {
        const [a, b] = await Promise.all([init.initialize(initSecrets()), init.initialize(initSecrets())]);
        assert.deepEqual(a, b, 'the shared single-flight result');
        assert.equal(disk.opens, 1, 'the disk was opened once');
        assert.equal(disk.formats, 1);
        assert.equal(backend.inits, 1);
        assert.deepEqual(extended, [15], 'PCR 15 was extended once');
        assert.equal(status.get().state, 'initialized');
      } finally {
        await setup.close();
      }
    });

    it('a concurrent Init with another master secret is refused, and the first goes on alone', async () => {
      const disk = new LatencyStateDisk(DISK_LATENCY_MS);
      const { common, setup, status } = nodeParts(disk);
      const init = new InitServer({
        ...common,
        metadata: metadata(),
        backend: new CountingBackend(),
        clock: () => new Date(),
        logTail: () => new Uint8Array(0),
      });
      try {
        const [first, other] = await Promise.allSettled([
          init.initialize(initSecrets()),
          init.initialize(initSecrets({ masterKey: Buffer.alloc(32, 9) })),
        ]);
        assert.equal(first.status, 'fulfilled');
        assert.equal(other.status, 'rejected');
        assert.match(
          (other as PromiseRejectedResult).reason.message,
          /already initialized \(or being initialized\) with another master secret/,
        );
        assert.equal(disk.opens, 1);
        assert.equal(status.get().state, 'initialized');
      } finally {
        await setup.close();
      }
    });
  });

  describe('a rejoin ticket against recover on a disk with latency', () => {
    it('a ticket arriving while recover unlocks the disk is not used: the disk is unlocked once, by recover', async () => {
      const disk = await rebootedDisk();
      const { common, setup, status, lock, extended } = nodeParts(disk);
      const service = rejoinService(disk, lock);
      const join = new JoinClient({
        ...common,
        metadata: service.metadata,
        backend: new CountingBackend(),
        joinServicePort: 30090,
        sleep: nextTick,
        ask: service.ask,
      });
      try {
        const recovered = new RecoveryServer(common).recover(
          RecoverSecrets.fromPartial({ masterKey: Buffer.from(MASTER.key), masterSalt: Buffer.from(MASTER.salt) }),
        );
        assert.equal(lock.owner, 'recover', 'recover holds the lock while the disk answers');
        await Promise.all([recovered, join.run('rejoin', new AbortController().signal)]);
        assert.ok(service.holders.includes('recover'), 'the ticket arrived while recover held the lock');
        assert.equal(disk.opens, 1, 'the disk was unlocked exactly once');
        assert.equal(lock.owner, 'recover');
        assert.equal(status.get().state, 'joined');
        assert.deepEqual(extended, [15]);
      } finally {
        await setup.close();
      }
    });

    it('recover arriving while a rejoin ticket unlocks the disk is refused: the disk is unlocked once, by the ticket', async () => {
      const disk = await rebootedDisk();
      const { common, setup, status, lock, extended } = nodeParts(disk);
      const service = rejoinService(disk, lock);
      const join = new JoinClient({
        ...common,
        metadata: service.metadata,
        backend: new CountingBackend(),
        joinServicePort: 30090,
        sleep: nextTick,
        ask: service.ask,
      });
      try {
        const rejoining = join.run('rejoin', new AbortController().signal);
        await disk.whenOpening();
        await assert.rejects(
          new RecoveryServer(common).recover(
            RecoverSecrets.fromPartial({ masterKey: Buffer.from(MASTER.key), masterSalt: Buffer.from(MASTER.salt) }),
          ),
          /rejoining \(or has rejoined\) its cluster through a join service; there is nothing to recover/,
        );
        await rejoining;
        assert.equal(disk.opens, 1, 'the disk was unlocked exactly once');
        assert.equal(lock.owner, 'join');
        assert.equal(status.get().state, 'joined');
        assert.deepEqual(extended, [15]);
      } finally {
        await setup.close();
      }
    });

    it('a wrong master secret gives the lock back unchanged, and the rejoin ticket then opens the disk', async () => {
      const disk = await rebootedDisk();
      const { common, setup, status, lock } = nodeParts(disk);
      const service = rejoinService(disk, lock);
      const join = new JoinClient({
        ...common,
        metadata: service.metadata,
        backend: new CountingBackend(),
        joinServicePort: 30090,
        sleep: nextTick,
        ask: service.ask,
      });
      try {
        const wrong = new RecoveryServer(common).recover(
          RecoverSecrets.fromPartial({ masterKey: Buffer.alloc(32, 7), masterSalt: Buffer.from(MASTER.salt) }),
        );
        await Promise.all([
          assert.rejects(wrong, /does not unlock the state disk/),
          join.run('rejoin', new AbortController().signal),
        ]);
        assert.equal(disk.opens, 2, "the wrong key, then the ticket's");
        assert.equal(lock.owner, 'join');
        assert.equal(status.get().state, 'joined');
      } finally {
        await setup.close();
      }
    });
  });

  describe('the transition table', () => {
    it('refuses a move it lacks with a typed error, logs it, and keeps the state', () => {
      const lines: Array<Record<string, unknown>> = [];
      const lock = new NodeLock();
      const status = new NodeStatusTracker('n', 'worker', {
        lock,
        logger: createLogger((line) => lines.push(JSON.parse(line) as Record<string, unknown>)),
      });
      assert.throws(() => status.set('joined'), IllegalTransitionError, 'the search cannot declare the node joined');
      const join = lock.tryLock('join')!;
      assert.throws(() => status.set('initializing', {}, join), /cannot go from waiting to initializing \(as join\)/);
      status.set('joining', {}, join);
      assert.throws(
        () => status.set('refused', { reason: 'late search result' }),
        /join holds the node lock/,
        'a search result never overwrites an owner',
      );
      status.set('joined', {}, join);
      assert.throws(() => status.set('failed', {}, join), /from joined to failed/, 'joined is final');
      assert.equal(status.get().state, 'joined');
      assert.deepEqual(
        lines.filter((l) => l.msg === 'node state change refused').map((l) => [l.from, l.to, l.by]),
        [
          ['waiting', 'joined', 'search'],
          ['waiting', 'initializing', 'join'],
          ['joining', 'refused', 'search'],
          ['joined', 'failed', 'join'],
        ],
      );
    });

    it("refuses an owner's move with a token that lost the lock", () => {
      const lock = new NodeLock();
      const status = new NodeStatusTracker('n', 'control-plane', { lock });
      const recover = lock.tryLock('recover')!;
      lock.release(recover);
      assert.throws(() => status.set('joining', {}, recover), NodeLockError);
      assert.equal(status.get().state, 'waiting');
    });

    it('has no way out of initialized and joined, and only init and recover leave failed', () => {
      for (const state of NODE_STATES) {
        for (const by of ['search', 'init', 'join', 'recover'] as const) {
          if (state === 'initialized' || state === 'joined')
            assert.equal(transitionAllowed(state, 'failed', by), false);
        }
      }
      const outOfFailed = NODE_TRANSITIONS.filter((t) => t.from.includes('failed')).map((t) => [t.to, t.by.join()]);
      assert.deepEqual(outOfFailed, [
        ['initializing', 'init'],
        ['joining', 'recover'],
      ]);
      const finals: NodeState[] = ['initialized', 'joined'];
      assert.ok(NODE_TRANSITIONS.every((t) => !t.from.some((f) => finals.includes(f))));
    });

    it('is the table docs/bootstrapper.md shows', async () => {
      const page = await fs.readFile(new URL('../../docs/bootstrapper.md', import.meta.url), 'utf8');
      const table = page.slice(page.indexOf('| from | to | by |')).split('\n\n')[0].split('\n').slice(2);
      const states = (cell: string) => [...cell.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]);
      const documented = table.flatMap((row) => {
        const [from, to, by] = row.split('|').slice(1, 4);
        return states(from).flatMap((f) =>
          states(to).flatMap((t) => by.split(',').map((who) => `${f} -> ${t} by ${who.trim()}`)),
        );
      });
      const coded = NODE_TRANSITIONS.flatMap((t) =>
        t.from.flatMap((f) => t.by.map((who) => `${f} -> ${t.to} by ${who}`)),
      );
      assert.deepEqual([...new Set(documented)].sort(), [...new Set(coded)].sort());
    });

    it("a setup step without the owner's token throws and leaves the disk untouched", async () => {
      const disk = new LatencyStateDisk(DISK_LATENCY_MS);
      const { setup, lock } = nodeParts(disk);
      const init = lock.tryLock('init')!;
      await assert.rejects(setup.openStateDisk({ owner: 'init' }, new Uint8Array(32)), NodeLockError);
      await assert.rejects(setup.createStore(lock.tryLock('join') ?? { owner: 'join' }, {} as never), NodeLockError);
      await assert.rejects(setup.extendClusterPcr({ owner: 'init' }, new Uint8Array(32)), NodeLockError);
      assert.equal(disk.opens, 0);
      assert.equal(lock.owner, 'init');
      assert.equal(lock.committed, false, 'no step of the owner ran yet');
      await setup.openStateDisk(init, new Uint8Array(32));
      assert.equal(lock.committed, true, 'opening the disk commits');
      await setup.close();
    });
  });
});
