/**
 * The join service's standard gRPC health check on its own port: SERVING while its cluster store answers,
 * NOT_SERVING while the store cannot (no quorum), NOT_FOUND for a service it does not know.
 */
import assert from 'node:assert/strict';
import { MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import { JOIN_SERVICE_NAME } from '../../joinservice/health.js';
import { startJoinService, type JoinServiceHandle } from '../../joinservice/server.js';
import { attestedChannelOptions, createAttestedClientCredentials } from '../../lib/atls/index.js';
import { StoreUnavailableError, type ClusterStore } from '../../lib/cluster-store/types.js';
import { createLogger } from '../../lib/logging/index.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
} from '../../proto/gen/grpc/health/v1/health.js';
import { makeTestStore, type TestStore } from './support/test-store.js';
import { imagePcrs, measurementsFor, TestAkRegistry } from './support/software-vtpm.js';

/** The test store, whose reads fail with "no quorum" while `down` is set. */
function switchableStore(store: ClusterStore): { store: ClusterStore; setDown(down: boolean): void } {
  let down = false;
  const proxy = new Proxy(store, {
    get(target, property) {
      if (property === 'readJoinConfig' && down)
        return () => Promise.reject(new StoreUnavailableError('2 of 3 members are down'));
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: proxy, setDown: (d) => (down = d) };
}

describe('joinservice/health (the standard gRPC health check)', () => {
  let test: TestStore;
  let switchable: ReturnType<typeof switchableStore>;
  let join: JoinServiceHandle;
  let client: InstanceType<typeof HealthClient>;
  const log: string[] = [];

  const check = (service: string) =>
    new Promise<{ status?: ServingStatus; code?: number; details?: string }>((resolve) =>
      client.check({ service }, (err, res) =>
        resolve(err ? { code: err.code, details: err.details } : { status: res.status }),
      ),
    );

  before(async () => {
    test = await makeTestStore(measurementsFor(imagePcrs('image v1')));
    switchable = switchableStore(test.store);
    join = await startJoinService({
      host: '127.0.0.1',
      port: 0,
      store: switchable.store,
      validatorDeps: { akRegistry: new TestAkRegistry() },
      logger: createLogger((line) => log.push(line)),
      tokenSink: new MemoryTokenSink(),
    });
    client = new HealthClient(
      `127.0.0.1:${join.port}`,
      await createAttestedClientCredentials(),
      attestedChannelOptions,
    );
  });
  after(async () => {
    client?.close();
    await join?.close();
    await test?.store.close();
  });

  it('is SERVING for the join service (by name or as the server, "") while the store answers', async () => {
    assert.deepEqual(await check(JOIN_SERVICE_NAME), { status: ServingStatus.SERVING });
    assert.deepEqual(await check(''), { status: ServingStatus.SERVING });
  });

  it('is NOT_SERVING while the store cannot answer, and SERVING again once it can', async () => {
    switchable.setDown(true);
    try {
      assert.deepEqual(await check(JOIN_SERVICE_NAME), { status: ServingStatus.NOT_SERVING });
    } finally {
      switchable.setDown(false);
    }
    assert.match(log.join('\n'), /health check: not serving.*no quorum/);
    assert.deepEqual(await check(JOIN_SERVICE_NAME), { status: ServingStatus.SERVING });
  });

  it('answers NOT_FOUND for a service it does not know', async () => {
    const res = await check('constellation.verify.v1.Verify');
    assert.equal(res.code, 5);
    assert.match(res.details ?? '', /unknown service "constellation.verify.v1.Verify"/);
  });
});
