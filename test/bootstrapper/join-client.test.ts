/**
 * The join client's search for a join service, on a fake clock: how long it waits between rounds, and that it stops
 * when the lock is taken or the node shuts down. No join service answers here (the metadata knows none, or the one
 * it names refuses connections), so every round ends as "unreachable".
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { JoinClient, type JoinClientOptions } from '../../bootstrapper/join-client.js';
import { NodeLock } from '../../bootstrapper/node-lock.js';
import type { NodeSetup } from '../../bootstrapper/node-setup.js';
import { NodeStatusTracker } from '../../bootstrapper/node-status.js';
import type { KubernetesBackend } from '../../bootstrapper/kubernetes/backend.js';
import type { StateDisk } from '../../bootstrapper/state-disk/types.js';
import type { Issuer } from '../../lib/attestation/types.js';
import { nullLogger } from '../../lib/logging/index.js';
import type { NodeMetadata } from '../../providers/contract.js';
import { unused } from '../support/unused.js';

/** A port on 127.0.0.1 that refuses connections (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function options(metadata: Partial<NodeMetadata>, overrides: Partial<JoinClientOptions> = {}): JoinClientOptions {
  const lock = new NodeLock();
  return {
    node: { name: 'worker-0', ip: '127.0.0.1', role: 'worker' },
    issuer: unused<Issuer>('issuer'),
    lock,
    status: new NodeStatusTracker('worker-0', 'worker', { lock }),
    setup: unused<NodeSetup>('setup'),
    stateDisk: unused<StateDisk>('stateDisk', { uuid: '00000000-0000-4000-8000-000000000000' }),
    logger: nullLogger,
    metadata: unused<NodeMetadata>('metadata', {
      loadBalancerEndpoint: async () => assert.fail('no load balancer'),
      peers: async () => [],
      ...metadata,
    }),
    backend: unused<KubernetesBackend>('backend'),
    joinServicePort: 30090,
    // A clock that stands still: each round takes no time, so every wait is the whole backoff.
    now: () => 0,
    ...overrides,
  };
}

/** A fake sleep that records each wait and, after `rounds` waits, runs `then` (which ends the client's run). */
function recordingSleep(rounds: number, then: () => void) {
  const waits: number[] = [];
  const sleep = async (ms: number, signal?: AbortSignal) => {
    waits.push(ms);
    if (waits.length === rounds) then();
    if (signal?.aborted) throw new Error('aborted');
  };
  return { waits, sleep };
}

describe('join client backoff (fake clock)', () => {
  it('doubles the wait after each round in which no join service answered, up to unreachableMaxMs', async () => {
    const stop = new AbortController();
    const { waits, sleep } = recordingSleep(6, () => stop.abort());
    const client = new JoinClient(
      options({}, { sleep, retry: { initialMs: 100, maxMs: 5000, unreachableMaxMs: 1000 } }),
    );
    await client.run('rejoin', stop.signal);
    assert.deepEqual(waits, [100, 200, 400, 800, 1000, 1000]);
  });

  it('asks an endpoint that refuses connections each round, and keeps the unreachable cap', async () => {
    const port = await closedPort();
    const stop = new AbortController();
    let asked = 0;
    const { waits, sleep } = recordingSleep(3, () => stop.abort());
    const client = new JoinClient(
      options(
        { loadBalancerEndpoint: async () => (asked++, '127.0.0.1') },
        { joinServicePort: port, sleep, retry: { initialMs: 250, maxMs: 5000, unreachableMaxMs: 500 } },
      ),
    );
    await client.run('rejoin', stop.signal);
    assert.deepEqual(waits, [250, 500, 500]);
    assert.equal(asked, 3);
  });

  it('counts the wait after an unreachable round from its start: a round that was held starts the next at once', async () => {
    const stop = new AbortController();
    let time = 0;
    const spent = [100, 2000, 100, 100];
    let asked = 0;
    const { waits, sleep } = recordingSleep(3, () => stop.abort());
    const client = new JoinClient(
      options(
        { loadBalancerEndpoint: async () => '10.0.0.1' },
        {
          sleep,
          now: () => time,
          retry: { initialMs: 250, maxMs: 5000, unreachableMaxMs: 500 },
          ask: async () => {
            time += spent[asked++]!;
            return { unreachable: 'the load balancer dropped the connection' };
          },
        },
      ),
    );
    await client.run('rejoin', stop.signal);
    // 250 - 100; the 2 s round (a held connection) waits nothing; then 500 - 100 twice.
    assert.deepEqual(waits, [150, 400, 400]);
    assert.equal(asked, 4);
  });

  it('stops as soon as another owner commits the node lock (the node was initialized instead)', async () => {
    const opts = options({});
    const { waits, sleep } = recordingSleep(2, () => opts.lock.commit(opts.lock.tryLock('init')!));
    await new JoinClient({ ...opts, sleep }).run('rejoin', new AbortController().signal);
    assert.equal(waits.length, 2);
  });
});
