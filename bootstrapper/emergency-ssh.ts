/**
 * The node's emergency SSH server (docs/workflows/emergency-ssh.md): OpenSSH's sshd, which the node image ships
 * (lib/node-image/build/), started by the node program once the node is in its cluster (initialized, joined,
 * rejoined or recovered), because only then is the state disk open and holds what sshd needs: the cluster's
 * emergency SSH CA (the only thing sshd trusts: lib/ssh/sshd-config.ts), the node's host key and the host
 * certificate that CA gave it (lib/ssh/host-key.ts). Before that the node has nothing to let anyone into.
 *
 * sshd listens on port 22 of the node's address. Its configuration is written to a runtime folder at start (it
 * names the state disk's mount point); sshd logs to stderr (-e), which goes into the node's log line by line.
 * Only an image that ships sshd runs it: the image marks that with EMERGENCY_SSH_MARKER; local process nodes
 * (which run on the user's machine, whose sshd is not ours) never start one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from '../lib/logging/index.js';
import {
  EMERGENCY_SSH_MARKER,
  NODE_SSH_CA_FILE,
  NODE_SSH_HOST_CERT_FILE,
  NODE_SSH_HOST_KEY_FILE,
  sshdConfig,
} from '../lib/ssh/sshd-config.js';
import { describeError } from './errors.js';

export const SSH_PORT = 22;

export interface EmergencySshOptions {
  sshdBinary: string;
  /** Where the generated sshd_config goes (a tmpfs folder of the node). */
  runDir: string;
  /** sshd's privilege-separation folder (Debian's build: /run/sshd); made at start. */
  privsepDir: string;
  /** The state disk's mount point (the files below it are named by lib/ssh/sshd-config.ts). */
  mountPoint: string;
  listenAddress: string;
  port?: number;
  logger: Logger;
  /** How long to wait for sshd to say it listens. */
  startTimeoutMs?: number;
}

/** The node image's sshd, when the image ships one (the marker names it); undefined on every other node. */
export async function imageSshd(marker = EMERGENCY_SSH_MARKER): Promise<string | undefined> {
  const text = await fs.readFile(marker, 'utf8').catch(() => undefined);
  return text?.trim() || undefined;
}

export class EmergencySshServer {
  private child: ChildProcess | undefined;
  private closed = false;

  constructor(private readonly options: EmergencySshOptions) {}

  /** Starts sshd; resolves once it listens (or logs why it could not, and resolves: SSH is for emergencies, the node goes on). */
  async start(): Promise<void> {
    const { logger, mountPoint } = this.options;
    const port = this.options.port ?? SSH_PORT;
    const file = (name: string) => path.join(mountPoint, name);
    for (const name of [NODE_SSH_CA_FILE, NODE_SSH_HOST_KEY_FILE, NODE_SSH_HOST_CERT_FILE]) {
      if (!(await fs.stat(file(name)).catch(() => undefined))) {
        logger.warn('no emergency SSH server: the state disk lacks a file it needs', { file: name });
        return;
      }
    }
    await fs.mkdir(this.options.runDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(this.options.privsepDir, { recursive: true, mode: 0o755 });
    await fs.chmod(this.options.privsepDir, 0o755);
    const config = path.join(this.options.runDir, 'sshd_config');
    await fs.writeFile(
      config,
      sshdConfig({
        hostKeyFile: file(NODE_SSH_HOST_KEY_FILE),
        hostCertificateFile: file(NODE_SSH_HOST_CERT_FILE),
        trustedUserCaKeysFile: file(NODE_SSH_CA_FILE),
        listenAddress: this.options.listenAddress,
        port,
      }),
      { mode: 0o600 },
    );
    if (this.closed) return;
    const child = spawn(this.options.sshdBinary, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    const sshdLog = logger.child({ component: 'sshd' });
    const listening = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.options.startTimeoutMs ?? 30_000);
      createInterface({ input: child.stderr! }).on('line', (line) => {
        sshdLog.info(line);
        if (/Server listening on/.test(line)) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(false);
      });
      child.once('error', (err) => {
        sshdLog.warn('sshd did not start', { reason: describeError(err) });
        clearTimeout(timer);
        resolve(false);
      });
    });
    child.once('exit', (code, signal) => {
      if (!this.closed) logger.warn('the emergency SSH server exited', { code, signal });
    });
    if (await listening)
      logger.info('emergency SSH server started', { address: `${this.options.listenAddress}:${port}` });
    else logger.warn('the emergency SSH server did not start listening');
  }

  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}
