import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDebugLog, createLogger, nullLogger, redact, REDACTED } from '../../lib/logging/index.js';

const SECRET = 'c2VjcmV0LXZhbHVlLW5ldmVyLWluLWEtbG9n';

describe('logging/redact', () => {
  it('redacts secret-looking keys in nested objects and arrays, any case', () => {
    const input = {
      cluster: { name: 'c1', initSecret: SECRET, nodes: [{ name: 'n1', stateDiskKey: SECRET, Token: SECRET }] },
      request: { master_secret: { KEY: SECRET, salt: SECRET }, jwe: SECRET, password: SECRET, privateKey: SECRET },
      measurementSalt: SECRET,
      bootstrapToken: SECRET,
      akPublicKey: 'public',
      clusterID: 'ab12',
    };
    const out = redact(input) as typeof input;
    assert.ok(!JSON.stringify(out).includes(SECRET));
    assert.equal(out.cluster.name, 'c1');
    assert.equal(out.cluster.initSecret, REDACTED);
    assert.equal(out.cluster.nodes[0].stateDiskKey, REDACTED);
    assert.equal(out.request.master_secret, REDACTED);
    assert.equal(out.akPublicKey, 'public');
    assert.equal(out.clusterID, 'ab12');
    assert.equal(input.cluster.initSecret, SECRET, 'the input is unchanged');
  });

  it('redacts byte arrays longer than 16 bytes and keeps short ones', () => {
    const out = redact({
      blob: new Uint8Array(17),
      nested: [Buffer.alloc(32)],
      digestPrefix: new Uint8Array([1, 2, 3]),
      ab: new ArrayBuffer(64),
    }) as Record<string, unknown>;
    assert.equal(out.blob, REDACTED);
    assert.deepEqual(out.nested, [REDACTED]);
    assert.deepEqual(out.digestPrefix, new Uint8Array([1, 2, 3]));
    assert.equal(out.ab, REDACTED);
  });

  it('redacts inside Maps, Errors and PEM private keys in strings; survives cycles', () => {
    const cyclic: Record<string, unknown> = { name: 'x' };
    cyclic.self = cyclic;
    const err = Object.assign(new Error('failed'), { token: SECRET });
    const pem = `key follows\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI${SECRET}\n-----END EC PRIVATE KEY-----\nend`;
    const out = redact({
      map: new Map<string, unknown>([
        ['secret', SECRET],
        ['ok', 1],
      ]),
      err,
      pem,
      cyclic,
    }) as Record<string, unknown>;
    assert.deepEqual(
      [...(out.map as Map<string, unknown>)],
      [
        ['secret', REDACTED],
        ['ok', 1],
      ],
    );
    assert.equal((out.err as Record<string, unknown>).message, 'failed');
    assert.equal((out.err as Record<string, unknown>).token, REDACTED);
    assert.equal(out.pem, `key follows\n${REDACTED}\nend`);
    assert.equal((out.cyclic as Record<string, unknown>).self, '[circular]');
  });
});

describe('logging/logger', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'debug-log-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('writes redacted JSON lines {time, level, msg, ...fields} with mode 0600 and appends across runs', async () => {
    const file = path.join(dir, 'constellation-debug.log');
    const clock = () => new Date('2024-05-01T12:00:00.000Z');
    const first = createDebugLog(file, clock);
    first.debug('starting', { command: 'init', masterSecret: { key: SECRET } });
    first.child({ component: 'atls' }).warn('retrying', { attempt: 2, nonce: new Uint8Array([0xde, 0xad]), big: 10n });
    await first.close();
    first.error('after close is dropped');
    const second = createDebugLog(file, clock);
    second.info('second run', { err: new Error('boom') });
    await second.close();

    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    const text = await fs.readFile(file, 'utf8');
    assert.ok(!text.includes(SECRET));
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 3);
    assert.deepEqual(lines[0], {
      time: '2024-05-01T12:00:00.000Z',
      level: 'debug',
      msg: 'starting',
      command: 'init',
      masterSecret: REDACTED,
    });
    assert.deepEqual(lines[1], {
      time: '2024-05-01T12:00:00.000Z',
      level: 'warn',
      msg: 'retrying',
      component: 'atls',
      attempt: 2,
      nonce: 'dead',
      big: '10',
    });
    assert.equal(lines[2].msg, 'second run');
    assert.equal((lines[2].err as Record<string, unknown>).message, 'boom');
  });

  it('tightens the mode of an existing log file', async () => {
    const file = path.join(dir, 'constellation-debug.log');
    await fs.writeFile(file, '', { mode: 0o644 });
    await createDebugLog(file).close();
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
  });

  it('createLogger sends lines to a sink; child fields nest; nullLogger discards', () => {
    const lines: string[] = [];
    const log = createLogger((l) => lines.push(l), { run: 1 }).child({ node: 'cp-0' });
    log.info('joined', { token: SECRET });
    assert.equal(lines.length, 1);
    const line = JSON.parse(lines[0]) as Record<string, unknown>;
    assert.equal(line.run, 1);
    assert.equal(line.node, 'cp-0');
    assert.equal(line.token, REDACTED);
    log.info('real', { msg: 'fake', level: 'error' });
    const disguised = JSON.parse(lines[1]) as Record<string, unknown>;
    assert.equal(disguised.msg, 'real');
    assert.equal(disguised.level, 'info');
    nullLogger.child({ a: 1 }).error('nothing');
  });
});
