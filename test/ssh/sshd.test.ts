/**
 * `constellation ssh` against a real OpenSSH server: sshd runs on 127.0.0.1 with the node's configuration
 * (lib/ssh/sshd-config.ts: TrustedUserCAKeys = the CA derived from the workspace's master secret, no passwords, no
 * authorized keys; a host key made as a node makes it, with a host certificate from the same CA). It lets in the
 * certificate the CLI makes, and refuses a self-signed certificate, an expired one, one from another cluster's CA,
 * and the bare key. The client checks the host strictly with only the known_hosts file the CLI wrote (the CA's
 * `@cert-authority` line): it accepts the node's certificate with no prompt, and another CA's line refuses it.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { writeMasterSecret } from '../../lib/workspace/master-secret.js';
import {
  deriveSshCa,
  knownHostsCaLine,
  parseSshPublicKey,
  signHostCertificate,
  signUserCertificate,
  sshCaPublicKeyLine,
} from '../../lib/ssh/certificate.js';
import { generateSshHostKey, publicKeyLine } from '../../lib/ssh/host-key.js';
import { sshdConfig } from '../../lib/ssh/sshd-config.js';
import { runCli } from '../support/cli.js';
import { requireTool } from '../support/require-tool.js';

const SSHD = '/usr/sbin/sshd';
const master = { key: new Uint8Array(32).fill(3), salt: new Uint8Array(32).fill(4) };
const otherMaster = { key: new Uint8Array(32).fill(5), salt: new Uint8Array(32).fill(4) };

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`sshd exited (${child.exitCode}): ${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`sshd did not listen on ${port}: ${log()}`);
}

describe('ssh: a real sshd with the node configuration', function () {
  this.timeout(60_000);
  let dir: string;
  let sshd: ChildProcess | undefined;
  let sshdLog = '';
  let port: number;
  let keyFile: string;
  let knownHosts: string;

  before(async function () {
    requireTool(this, spawnSync(SSHD, ['-V']).error === undefined, 'sshd (openssh-server)');
    requireTool(this, spawnSync('ssh', ['-V']).error === undefined, 'ssh and ssh-keygen (openssh-client)');
    requireTool(this, process.getuid?.() === 0, 'root (sshd runs as root)');
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sshd-'));
    const workspace = path.join(dir, 'workspace');
    await fs.mkdir(workspace);
    await writeMasterSecret(workspace, master);
    keyFile = path.join(dir, 'id_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'operator', '-f', keyFile]);
    // The node's host key as the node program makes it (OpenSSH's private key format, written by us), certified by
    // the CA for the address the client uses: ssh-keygen reads the same public key back from the private one.
    const hostKey = generateSshHostKey();
    await fs.writeFile(path.join(dir, 'host_key'), hostKey.privateKeyFile, { mode: 0o600 });
    assert.equal(
      execFileSync('ssh-keygen', ['-y', '-f', path.join(dir, 'host_key')], { encoding: 'utf8' }).split(' ')[1],
      publicKeyLine(hostKey.publicKey).split(' ')[1],
    );
    const now = Math.floor(Date.now() / 1000);
    await fs.writeFile(
      path.join(dir, 'host_key-cert.pub'),
      signHostCertificate(deriveSshCa(master), hostKey.publicKey, ['127.0.0.1', 'node-0'], now - 300),
    );
    // What a node holds after init or join: the CA public key of its cluster (derived from the same master secret).
    await fs.writeFile(path.join(dir, 'ssh_ca.pub'), sshCaPublicKeyLine(deriveSshCa(master).publicKey));
    port = await freePort();
    await fs.writeFile(
      path.join(dir, 'sshd_config'),
      `${sshdConfig({ hostKeyFile: path.join(dir, 'host_key'), hostCertificateFile: path.join(dir, 'host_key-cert.pub'), trustedUserCaKeysFile: path.join(dir, 'ssh_ca.pub'), listenAddress: '127.0.0.1', port })}LogLevel VERBOSE\n`,
    );
    // sshd's privilege-separation directory (Debian's package makes it at boot through its service, which no
    // container runs).
    await fs.mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    execFileSync(SSHD, ['-t', '-f', path.join(dir, 'sshd_config')]);
    sshd = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
    sshd.stderr?.on('data', (chunk: Buffer) => (sshdLog += chunk.toString()));
    await waitForPort(port, sshd, () => sshdLog);

    const cli = await runCli(['ssh', '--key', `${keyFile}.pub`, '-C', workspace]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /Wrote the SSH certificate .*id_ed25519-cert\.pub/);
    knownHosts = path.join(workspace, 'constellation-known-hosts');
    assert.equal(await fs.readFile(knownHosts, 'utf8'), knownHostsCaLine(deriveSshCa(master).publicKey));
  });

  after(async () => {
    if (sshd && sshd.exitCode === null) {
      const exited = new Promise((resolve) => sshd?.once('exit', resolve));
      sshd.kill('SIGTERM');
      await exited;
    }
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  /**
   * `ssh root@127.0.0.1 echo in` with the key and the given certificate file (or none), checking the host strictly
   * against `knownHostsFile` (default: the CLI's); its exit code and stderr.
   */
  function login(
    certificateFile: string | undefined,
    knownHostsFile = knownHosts,
  ): { code: number | null; stderr: string } {
    const result = spawnSync(
      'ssh',
      [
        '-F',
        '/dev/null',
        '-p',
        String(port),
        '-i',
        keyFile,
        '-o',
        `CertificateFile=${certificateFile ?? '/dev/null'}`,
        '-o',
        'IdentitiesOnly=yes',
        '-o',
        'BatchMode=yes',
        '-o',
        'ConnectTimeout=20',
        '-o',
        'StrictHostKeyChecking=yes',
        '-o',
        `UserKnownHostsFile=${knownHostsFile}`,
        '-o',
        'GlobalKnownHostsFile=/dev/null',
        'root@127.0.0.1',
        'echo in',
      ],
      { encoding: 'utf8', timeout: 30_000, env: { ...process.env, SSH_AUTH_SOCK: '' } },
    );
    assert.equal(result.error, undefined);
    return { code: result.status, stderr: `${result.stdout}${result.stderr}` };
  }

  /** Waits (up to 5 s) for sshd's log to show `pattern`: sshd writes it as the connection ends. */
  async function sshdLogged(pattern: RegExp): Promise<void> {
    for (let i = 0; i < 100 && !pattern.test(sshdLog); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.match(sshdLog, pattern);
  }

  async function certificate(
    file: string,
    validAfter: number,
    validBefore: number,
    ca = deriveSshCa(master),
  ): Promise<string> {
    const key = parseSshPublicKey(await fs.readFile(`${keyFile}.pub`, 'utf8'), `${keyFile}.pub`);
    await fs.writeFile(file, signUserCertificate(ca, key, { validAfter, validBefore, keyId: path.basename(file) }));
    return file;
  }

  it("refuses the node's host certificate when known_hosts trusts another cluster's CA (no prompt, no login)", async () => {
    const other = path.join(dir, 'other-known-hosts');
    await fs.writeFile(other, knownHostsCaLine(deriveSshCa(otherMaster).publicKey));
    const result = login(`${keyFile}-cert.pub`, other);
    assert.equal(result.code, 255);
    assert.match(result.stderr, /Host key verification failed/);
  });

  it('lets in the certificate `constellation ssh` wrote beside the key; the host is accepted by its host certificate', async () => {
    const result = login(`${keyFile}-cert.pub`);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /^in$/m);
    await sshdLogged(/Accepted publickey for root .* ED25519-CERT SHA256:\S+ ID constellation-emergency-access/);
  });

  it("refuses a self-signed certificate (the user's own key as its CA)", async () => {
    // ssh-keygen -s writes <pub>-cert.pub: sign a copy of the public key, so the CLI's certificate stays in place.
    const copy = path.join(dir, 'self.pub');
    await fs.copyFile(`${keyFile}.pub`, copy);
    execFileSync('ssh-keygen', ['-q', '-s', keyFile, '-I', 'self', '-n', 'root', '-V', '-5m:+1h', copy], {
      stdio: 'ignore',
    });
    const result = login(path.join(dir, 'self-cert.pub'));
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /Permission denied \(publickey\)/);
    await sshdLogged(/Failed publickey for root .* ID self /);
  });

  it('refuses an expired certificate from the right CA', async () => {
    const now = Math.floor(Date.now() / 1000);
    const result = login(await certificate(path.join(dir, 'expired-cert.pub'), now - 2 * 86_400, now - 86_400));
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /Permission denied \(publickey\)/);
    await sshdLogged(/Certificate invalid: expired\r?\nFailed publickey for root .* ID expired-cert\.pub /);
  });

  it("refuses a certificate of another cluster's CA", async () => {
    const now = Math.floor(Date.now() / 1000);
    const result = login(
      await certificate(path.join(dir, 'other-cert.pub'), now - 60, now + 3600, deriveSshCa(otherMaster)),
    );
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /Permission denied \(publickey\)/);
    await sshdLogged(/Failed publickey for root .* ID other-cert\.pub /);
  });

  it('refuses the bare key without a certificate', () => {
    const result = login(undefined);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /Permission denied \(publickey\)/);
  });
});
