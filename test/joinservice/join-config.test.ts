import assert from 'node:assert/strict';
import { JoinConfigReader } from '../../joinservice/join-config.js';
import { ENTRY } from '../../lib/cluster-store/codec.js';
import { StoreNotInitializedError, StoreUnavailableError } from '../../lib/cluster-store/types.js';
import { MemoryClusterStore } from '../../lib/cluster-store/memory.js';
import { UserError } from '../../lib/errors.js';
import { createLogger, type Logger } from '../../lib/logging/index.js';
import { makeTestStore, type TestStore } from './support/test-store.js';
import { imagePcrs, measurementsFor } from './support/software-vtpm.js';
import { imageMeasurements } from '../support/measurements.js';

function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: createLogger((line) => lines.push(JSON.parse(line))), lines };
}

describe('joinservice/join-config: the join configuration from the cluster store', () => {
  let t: TestStore;
  beforeEach(async () => {
    t = await makeTestStore(measurementsFor(imagePcrs()));
  });

  it('reads back what was written, with the PKI loaded', async () => {
    const config = await new JoinConfigReader(t.store, { logger: recordingLogger().logger }).current();
    assert.deepEqual(config.attestation, t.contents.attestation);
    assert.deepEqual(config.masterSecret, t.masterSecret);
    assert.deepEqual(config.measurementSalt, t.contents.measurementSalt);
    assert.deepEqual(config.cluster, t.contents.cluster);
    assert.equal(config.loadedPki.files['ca.crt'], t.pki['ca.crt']);
    assert.equal(config.generation, 1);
  });

  it('names the missing or broken entry and never quotes the master secret', async () => {
    const read = () => new JoinConfigReader(t.store, { logger: recordingLogger().logger }).current();
    t.store.entries.delete(ENTRY.pki('sa.pub'));
    await assert.rejects(
      read(),
      (err: Error) => err instanceof UserError && /missing join\/pki\/sa\.pub/.test(err.message),
    );
    t.store.entries.set(ENTRY.pki('sa.pub'), t.pki['sa.pub']);
    t.store.entries.set(ENTRY.masterSecret, '{"key": "c2VjcmV0c2VjcmV0c2VjcmV0", "salt": 5}');
    await assert.rejects(
      read(),
      (err: Error) => /join\/master-secret/.test(err.message) && !err.message.includes('c2VjcmV0'),
    );
    await t.store.writeJoinConfig({ masterSecret: t.masterSecret });
    t.store.entries.set(
      ENTRY.attestationConfig,
      JSON.stringify({ variant: 'local-vtpm', config: { measurements: { 4: { expected: 'zz', warnOnly: false } } } }),
    );
    await assert.rejects(read(), /join\/attestation-config: config\.measurements\.4\.expected: expected must be hex/);
    await t.store.writeJoinConfig({ attestation: t.contents.attestation });
    t.store.entries.set(ENTRY.measurementSalt, 'abcd');
    await assert.rejects(read(), /join\/measurement-salt must hold 32 bytes as hex/);
  });

  it('an empty store says the cluster was not initialized through it', async () => {
    await assert.rejects(
      new JoinConfigReader(new MemoryClusterStore(), { logger: recordingLogger().logger }).current(),
      StoreNotInitializedError,
    );
  });

  it('a change written once is what the next request reads, without restart; an unchanged store gives the same configuration', async () => {
    const { logger, lines } = recordingLogger();
    const reader = new JoinConfigReader(t.store, { logger });
    const first = await reader.current();
    assert.equal(await reader.current(), first, 'unchanged store: the same configuration');
    await t.store.writeJoinConfig({ cluster: { apiServerEndpoint: '10.0.0.9:6443', kubernetesVersion: 'v1.32.0' } });
    const second = await reader.current();
    assert.equal(second.generation, 2);
    assert.equal(second.cluster.apiServerEndpoint, '10.0.0.9:6443');
    assert.ok(lines.some((l) => l.msg === 'join configuration reloaded' && l.generation === 2));
  });

  it('a broken new revision keeps the last good configuration and warns once, until it is fixed', async () => {
    const { logger, lines } = recordingLogger();
    const reader = new JoinConfigReader(t.store, { logger });
    const good = await reader.current();
    t.store.entries.set(ENTRY.attestationConfig, '{"variant": "local-vtpm", "config": {"measu');
    await t.store.putNode({
      name: 'n',
      role: 'worker',
      diskUuid: 'u',
      joinedAt: 't',
      lastEntry: 'join',
      lastEntryAt: 't',
    }); // a new revision
    assert.equal(await reader.current(), good);
    assert.equal(await reader.current(), good);
    assert.equal(lines.filter((l) => l.level === 'warn').length, 1);
    assert.match(String(lines.find((l) => l.level === 'warn')!.reason), /join\/attestation-config is not valid JSON/);

    await t.store.writeJoinConfig({
      attestation: { ...t.contents.attestation, previous: [{ measurements: imageMeasurements('dd') }] },
    });
    const fixed = await reader.current();
    assert.equal(fixed.generation, 2);
    assert.equal(fixed.attestation.previous?.length, 1);
  });

  it('the accept hook can refuse a configuration, which then counts as broken', async () => {
    const { logger, lines } = recordingLogger();
    const reader = new JoinConfigReader(t.store, {
      logger,
      accept: async (config) => {
        if (config.attestation.variant !== 'local-vtpm')
          throw new UserError(`Unknown attestation variant "${config.attestation.variant}"`);
      },
    });
    const good = await reader.current();
    await t.store.writeJoinConfig({ attestation: { ...t.contents.attestation, variant: 'nope' } });
    assert.equal(await reader.current(), good);
    assert.match(String(lines.find((l) => l.level === 'warn')?.reason), /Unknown attestation variant "nope"/);
  });

  it('a store without quorum is never answered from memory', async () => {
    const reader = new JoinConfigReader(t.store, { logger: recordingLogger().logger });
    await reader.current();
    t.store.available = false;
    await assert.rejects(
      reader.current(),
      (err: Error) => err instanceof StoreUnavailableError && /The control plane has no quorum/.test(err.message),
    );
  });
});
