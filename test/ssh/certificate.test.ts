import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { hkdfSha256 } from '../../lib/kms/keys.js';
import {
  certificateType,
  deriveSshCa,
  parseSshPublicKey,
  signUserCertificate,
  sshCaPublicKeyLine,
  SSH_CA_KEY_INFO,
} from '../../lib/ssh/certificate.js';
import { writeMasterSecret } from '../../lib/workspace/master-secret.js';
import { runCli } from '../support/cli.js';
import { requireTool, toolRuns } from '../support/require-tool.js';

const master = { key: new Uint8Array(32).fill(7), salt: new Uint8Array(32).fill(9) };
const hasKeygen = spawnSync('ssh-keygen', ['-?']).error === undefined;

describe('ssh/certificate', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ssh-cert-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('derives the CA seed as upstream: HKDF(masterKey, masterSalt, "key-ca_emergency_ssh", 32), cross-checked with openssl kdf', function () {
    requireTool(this, toolRuns('openssl', ['version']), 'openssl');
    assert.equal(SSH_CA_KEY_INFO, 'key-ca_emergency_ssh');
    const ours = Buffer.from(hkdfSha256(master.key, master.salt, SSH_CA_KEY_INFO, 32)).toString('hex');
    const theirs = execFileSync(
      'openssl',
      [
        'kdf',
        '-keylen',
        '32',
        '-kdfopt',
        'digest:SHA256',
        '-kdfopt',
        `hexkey:${Buffer.from(master.key).toString('hex')}`,
        '-kdfopt',
        `hexsalt:${Buffer.from(master.salt).toString('hex')}`,
        '-kdfopt',
        `info:${SSH_CA_KEY_INFO}`,
        'HKDF',
      ],
      { encoding: 'utf8' },
    )
      .trim()
      .replace(/:/g, '')
      .toLowerCase();
    assert.equal(ours, theirs);
  });

  it('derives the same CA from the same master secret and another from another', () => {
    const a = deriveSshCa(master);
    assert.deepEqual(deriveSshCa(master).publicKey, a.publicKey);
    assert.notDeepEqual(deriveSshCa({ key: new Uint8Array(32).fill(8), salt: master.salt }).publicKey, a.publicKey);
    assert.equal(a.publicKey.length, 32);
  });

  it('names certificate types as OpenSSH does', () => {
    assert.equal(certificateType('ssh-ed25519'), 'ssh-ed25519-cert-v01@openssh.com');
    assert.equal(certificateType('ecdsa-sha2-nistp256'), 'ecdsa-sha2-nistp256-cert-v01@openssh.com');
    assert.equal(certificateType('sk-ssh-ed25519@openssh.com'), 'sk-ssh-ed25519-cert-v01@openssh.com');
  });

  for (const [type, bits] of [
    ['ed25519', undefined],
    ['rsa', '2048'],
    ['ecdsa', '256'],
  ] as const) {
    it(`makes a ${type} user certificate that ssh-keygen -L reads: root, the CA's fingerprint, the validity, upstream's extensions`, async function () {
      requireTool(this, hasKeygen, 'ssh-keygen (openssh-client)');
      const keyFile = path.join(dir, `id_${type}`);
      execFileSync('ssh-keygen', [
        '-q',
        '-t',
        type,
        ...(bits ? ['-b', bits] : []),
        '-N',
        '',
        '-C',
        'me@laptop',
        '-f',
        keyFile,
      ]);
      const key = parseSshPublicKey(await fs.readFile(`${keyFile}.pub`, 'utf8'), `${keyFile}.pub`);
      const ca = deriveSshCa(master);
      const cert = signUserCertificate(ca, key, {
        validAfter: 1_700_000_000,
        validBefore: 1_700_086_400,
        keyId: 'constellation-emergency-access',
      });
      await fs.writeFile(`${keyFile}-cert.pub`, cert);
      await fs.writeFile(path.join(dir, 'ca.pub'), sshCaPublicKeyLine(ca.publicKey));
      const listing = execFileSync('ssh-keygen', ['-L', '-f', `${keyFile}-cert.pub`], { encoding: 'utf8' });
      const caFingerprint = execFileSync('ssh-keygen', ['-l', '-f', path.join(dir, 'ca.pub')], {
        encoding: 'utf8',
      }).split(' ')[1];
      assert.match(listing, new RegExp(`Type: ${certificateType(key.type)} user certificate`));
      assert.match(
        listing,
        new RegExp(`Signing CA: ED25519 ${caFingerprint.replace(/[+/]/g, '\\$&')} \\(using ssh-ed25519\\)`),
      );
      assert.match(listing, /Key ID: "constellation-emergency-access"/);
      assert.match(listing, /Principals: \n\s+root\n/);
      assert.match(listing, /Critical Options: \(none\)/);
      assert.match(listing, /Extensions: \n\s+permit-port-forwarding\n\s+permit-pty\n/);
      const validity = /Valid: from (\S+) to (\S+)/.exec(listing);
      assert.ok(validity, listing);
      // ssh-keygen prints local time without a zone: compare as local dates.
      assert.equal(new Date(validity[1]).getTime() / 1000, 1_700_000_000);
      assert.equal(new Date(validity[2]).getTime() / 1000, 1_700_086_400);
    });
  }

  const bad: [string, string, RegExp][] = [
    [
      'a private key',
      '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n',
      /is a private key/,
    ],
    ['a certificate', 'ssh-ed25519-cert-v01@openssh.com AAAA me\n', /is an SSH certificate/],
    ['an unknown type', 'ssh-dss AAAAB3NzaC1kc3M= me\n', /not an SSH public key type/],
    ['a damaged key', 'ssh-ed25519 AAAAC3NzaC1yc2E= me\n', /damaged ssh-ed25519 key/],
    ['two keys', 'ssh-ed25519 AAAA a\nssh-ed25519 AAAA b\n', /2 key lines/],
    ['nothing', '\n', /0 key lines/],
  ];
  for (const [what, text, message] of bad) {
    it(`refuses ${what} as the user's key, with a hint`, () => {
      assert.throws(
        () => parseSshPublicKey(text, 'key.pub'),
        (err: unknown) =>
          err instanceof UserError && message.test(err.message) && /ssh-keygen -t ed25519/.test(err.hint ?? ''),
      );
    });
  }
});

describe('constellation ssh (the built CLI)', function () {
  this.timeout(30_000);
  let dir: string;
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ssh-cli-'));
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('without a master secret says which file is missing and what to do, with no stack trace', async () => {
    await fs.writeFile(
      path.join(dir, 'id.pub'),
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPvs2eN7p0f6Jk8oC7wQ0Q5qVgE3Xh8m8d8d8d8d8d8d me\n',
    );
    const res = await runCli(['ssh', '--key', path.join(dir, 'id.pub'), '-C', dir]);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /The master secret .*constellation-mastersecret\.json does not exist/);
    assert.match(res.stderr, /-C <dir>/);
    assert.doesNotMatch(res.stderr, /\n\s+at /);
    assert.equal(await fs.stat(path.join(dir, 'id-cert.pub')).catch(() => undefined), undefined);
  });

  it('with a missing key file names it', async () => {
    const res = await runCli(['ssh', '--key', path.join(dir, 'nope.pub'), '-C', dir]);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /The SSH public key .*nope\.pub does not exist/);
    assert.match(res.stderr, /ssh-keygen -t ed25519/);
  });

  it('--json gives the certificate file, principals and validity, and no secret', async () => {
    const ws = path.join(dir, 'ws');
    await fs.mkdir(ws);
    await writeMasterSecret(ws, master);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'id_ed25519')]);
    const res = await runCli(['ssh', '--key', path.join(dir, 'id_ed25519.pub'), '-C', ws, '--json']);
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as {
      certificateFile: string;
      principals: string[];
      validAfter: string;
      validBefore: string;
      caPublicKey: string;
    };
    assert.equal(out.certificateFile, path.join(dir, 'id_ed25519-cert.pub'));
    assert.deepEqual(out.principals, ['root']);
    // Valid from five minutes before its signing (a node's clock may lag this machine's) until 24 hours after.
    assert.equal(Date.parse(out.validBefore) - Date.parse(out.validAfter), 24 * 3600 * 1000 + 300 * 1000);
    assert.ok(Date.parse(out.validAfter) <= Date.now() - 299_000, 'valid before its signing');
    assert.equal(out.caPublicKey, sshCaPublicKeyLine(deriveSshCa(master).publicKey).trim());
    const secret = await fs.readFile(path.join(ws, 'constellation-mastersecret.json'), 'utf8');
    for (const value of Object.values(JSON.parse(secret) as Record<string, string>))
      assert.ok(!res.stdout.includes(value));
  });
});
