import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { readServiceFiles, ServiceFilesWatcher, SERVICE_FILES } from '../../joinservice/service-files.js';
import { UserError } from '../../lib/errors.js';
import { createLogger, type Logger } from '../../lib/logging/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { makeServiceDir, type TestServiceDir } from './support/service-dir.js';
import { imagePcrs, measurementsFor } from './support/software-vtpm.js';

function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: createLogger((line) => lines.push(JSON.parse(line))), lines };
}

describe('joinservice/service-files', () => {
  let service: TestServiceDir;
  beforeEach(async () => {
    service = await makeServiceDir(measurementsFor(imagePcrs()));
  });
  afterEach(() => service.remove());

  it('reads back what was written, with 0600 files', async () => {
    const config = await readServiceFiles(service.dir);
    assert.deepEqual(config.attestation, service.contents.attestation);
    assert.deepEqual(config.masterSecret, service.masterSecret);
    assert.deepEqual(config.measurementSalt, service.contents.measurementSalt);
    assert.deepEqual(config.cluster, service.contents.cluster);
    assert.equal(config.pki.files['ca.crt'], service.pki['ca.crt']);
    assert.equal((await fs.stat(path.join(service.dir, 'master-secret.json'))).mode & 0o777, 0o600);
    assert.equal((await fs.stat(path.join(service.dir, 'pki/etcd/ca.key'))).mode & 0o777, 0o600);
  });

  it('names the missing or broken file and never quotes the master secret', async () => {
    await fs.rm(path.join(service.dir, 'pki/sa.pub'));
    await assert.rejects(readServiceFiles(service.dir), (err: Error) => err instanceof UserError && /pki\/sa\.pub does not exist/.test(err.message));
    await fs.writeFile(path.join(service.dir, 'pki/sa.pub'), service.pki['sa.pub']);
    await fs.writeFile(path.join(service.dir, SERVICE_FILES.masterSecret), '{"key": "c2VjcmV0c2VjcmV0c2VjcmV0", "salt": 5}');
    await assert.rejects(readServiceFiles(service.dir), (err: Error) => /master-secret\.json/.test(err.message) && !err.message.includes('c2VjcmV0'));
    await writeFileAtomic(path.join(service.dir, SERVICE_FILES.masterSecret), JSON.stringify({ key: Buffer.alloc(32).toString('base64'), salt: Buffer.alloc(32).toString('base64') }));
    await fs.writeFile(path.join(service.dir, SERVICE_FILES.attestationConfig), JSON.stringify({ variant: 'local-vtpm', config: { measurements: { 4: { expected: 'zz', warnOnly: false } } } }));
    await assert.rejects(readServiceFiles(service.dir), /attestation-config\.json: config\.measurements\.4\.expected: expected must be hex/);
    await fs.writeFile(path.join(service.dir, SERVICE_FILES.attestationConfig), JSON.stringify(service.contents.attestation));
    await fs.writeFile(path.join(service.dir, SERVICE_FILES.measurementSalt), 'abcd\n');
    await assert.rejects(readServiceFiles(service.dir), /measurement-salt must hold 32 bytes as hex/);
  });

  it('the watcher reloads a changed file on the next request, without restart', async () => {
    const { logger, lines } = recordingLogger();
    const watcher = new ServiceFilesWatcher(service.dir, { logger });
    const first = await watcher.start();
    assert.equal(first.generation, 1);
    assert.equal(await watcher.current(), first, 'unchanged files: the same configuration');

    await writeFileAtomic(path.join(service.dir, SERVICE_FILES.cluster), JSON.stringify({ apiServerEndpoint: '10.0.0.9:6443', kubernetesVersion: 'v1.32.0' }));
    const second = await watcher.current();
    assert.equal(second.generation, 2);
    assert.equal(second.cluster.apiServerEndpoint, '10.0.0.9:6443');
    assert.ok(lines.some((l) => l.msg === 'join service files reloaded' && l.generation === 2));
  });

  it('a broken new file keeps the last good configuration and warns once, until the file is fixed', async () => {
    const { logger, lines } = recordingLogger();
    const watcher = new ServiceFilesWatcher(service.dir, { logger });
    const good = await watcher.start();
    const file = path.join(service.dir, SERVICE_FILES.attestationConfig);
    await fs.writeFile(file, '{"variant": "local-vtpm", "config": {"measu'); // half-written
    assert.equal(await watcher.current(), good);
    assert.equal(await watcher.current(), good);
    assert.equal(lines.filter((l) => l.level === 'warn').length, 1);
    assert.match(String(lines.find((l) => l.level === 'warn')!.reason), /attestation-config\.json is not valid JSON/);

    await fs.rm(file);
    assert.equal(await watcher.current(), good, 'a deleted file keeps the last good configuration too');

    await writeFileAtomic(file, JSON.stringify({ ...service.contents.attestation, previous: [{ measurements: {} }] }));
    const fixed = await watcher.current();
    assert.equal(fixed.generation, 2);
    assert.equal(fixed.attestation.previous?.length, 1);
  });

  it('the accept hook can refuse a configuration, which then counts as broken', async () => {
    const { logger, lines } = recordingLogger();
    const watcher = new ServiceFilesWatcher(service.dir, {
      logger,
      accept: async (config) => {
        if (config.attestation.variant !== 'local-vtpm') throw new UserError(`Unknown attestation variant "${config.attestation.variant}"`);
      },
    });
    const good = await watcher.start();
    await writeFileAtomic(path.join(service.dir, SERVICE_FILES.attestationConfig), JSON.stringify({ ...service.contents.attestation, variant: 'nope' }));
    assert.equal(await watcher.current(), good);
    assert.match(String(lines.find((l) => l.level === 'warn')?.reason), /Unknown attestation variant "nope"/);
  });

  it('start() refuses an incomplete directory', async () => {
    await fs.rm(path.join(service.dir, SERVICE_FILES.cluster));
    await assert.rejects(new ServiceFilesWatcher(service.dir, { logger: recordingLogger().logger }).start(), UserError);
  });
});
