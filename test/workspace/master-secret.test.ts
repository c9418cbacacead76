import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { generateMasterSecret } from '../../lib/kms/index.js';
import { FileExistsError } from '../../lib/workspace/atomic-file.js';
import { MASTER_SECRET_FILE } from '../../lib/workspace/files.js';
import { parseMasterSecret, readMasterSecret, writeMasterSecret } from '../../lib/workspace/master-secret.js';

const b64 = (n: number, fill: number) => Buffer.alloc(n, fill).toString('base64');

describe('workspace/master-secret', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'master-secret-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('writes {"key","salt"} as base64 with mode 0600 and reads it back', async () => {
    const secret = generateMasterSecret();
    await writeMasterSecret(dir, secret);
    const file = path.join(dir, MASTER_SECRET_FILE);
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    const json = JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, string>;
    assert.deepEqual(Object.keys(json), ['key', 'salt']);
    assert.equal(json.key, Buffer.from(secret.key).toString('base64'));
    const read = await readMasterSecret(dir);
    assert.deepEqual(read.key, secret.key);
    assert.deepEqual(read.salt, secret.salt);
  });

  it('never overwrites an existing master secret', async () => {
    const first = generateMasterSecret();
    await writeMasterSecret(dir, first);
    await assert.rejects(writeMasterSecret(dir, generateMasterSecret()), FileExistsError);
    assert.deepEqual((await readMasterSecret(dir)).key, first.key);
  });

  it('refuses to write a short key', async () => {
    await assert.rejects(
      writeMasterSecret(dir, { key: new Uint8Array(8), salt: new Uint8Array(32) }),
      /key" of 8 bytes/,
    );
    await assert.rejects(fs.stat(path.join(dir, MASTER_SECRET_FILE)), { code: 'ENOENT' });
  });

  it('reads a file written by Constellation (16-byte key, tab-indented)', () => {
    const text = `{\n\t"key": "${b64(16, 1)}",\n\t"salt": "${b64(32, 2)}"\n}`;
    const secret = parseMasterSecret(text);
    assert.equal(secret.key.length, 16);
    assert.equal(secret.salt.length, 32);
  });

  it('names a missing file', async () => {
    await assert.rejects(readMasterSecret(dir), (err: Error) => {
      assert.ok(err instanceof UserError);
      assert.match(err.message, /constellation-mastersecret\.json does not exist/);
      return true;
    });
  });

  const secretKey = b64(32, 0xab);
  const secretSalt = b64(32, 0xcd);
  const bad: [string, string, RegExp][] = [
    ['a short key', JSON.stringify({ key: b64(15, 0xab), salt: secretSalt }), /"key" of 15 bytes; at least 16/],
    ['a short salt', JSON.stringify({ key: secretKey, salt: b64(31, 0xcd) }), /"salt" of 31 bytes; at least 32/],
    [
      'bad base64 in key',
      JSON.stringify({ key: `${secretKey.slice(0, -4)}!!!!`, salt: secretSalt }),
      /"key" that is not valid base64/,
    ],
    [
      'base64 without padding',
      JSON.stringify({ key: secretKey, salt: secretSalt.replace(/=+$/, '') }),
      /"salt" that is not valid base64/,
    ],
    ['a missing key', JSON.stringify({ salt: secretSalt }), /has no "key"/],
    ['a missing salt', JSON.stringify({ key: secretKey }), /has no "salt"/],
    ['a number as key', JSON.stringify({ key: 42, salt: secretSalt }), /"key" that is not a string/],
    ['not JSON', `{"key": "${secretKey}", "salt": "${secretSalt}"`, /is not valid JSON/],
    ['a JSON array', JSON.stringify([secretKey, secretSalt]), /is not a JSON object/],
    ['an empty file', '', /is not valid JSON/],
  ];
  for (const [what, text, message] of bad) {
    it(`refuses ${what} with a message that does not contain the secret`, async () => {
      await fs.writeFile(path.join(dir, MASTER_SECRET_FILE), text, { mode: 0o600 });
      await assert.rejects(readMasterSecret(dir), (err: Error) => {
        assert.ok(err instanceof UserError, 'a UserError');
        assert.match(err.message, message);
        assert.match(err.message, /constellation-mastersecret\.json/);
        const shown = `${err.message}\n${err.hint ?? ''}`;
        for (const s of [
          secretKey,
          secretSalt,
          secretKey.slice(0, 8),
          secretSalt.slice(0, 8),
          'abababab',
          'cdcdcdcd',
        ]) {
          assert.ok(!shown.includes(s), `message must not contain ${s}`);
        }
        assert.equal(err.cause, undefined);
        return true;
      });
    });
  }
});
