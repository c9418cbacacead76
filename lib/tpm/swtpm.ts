/**
 * Runs and controls swtpm, the software TPM 2.0 every local node owns (docs/design.md#providers).
 * One swtpm process per state directory: TPM commands on `<socketDir>/swtpm.sock`, swtpm's control protocol on
 * `<socketDir>/swtpm.sock.ctrl` (power cycle, shutdown); the socket folder is the state directory unless the caller
 * names a shorter one (a unix socket path has at most 107 bytes, a state directory in a workspace can be longer). The state is manufactured once with swtpm_setup, so the
 * endorsement seed, and with it the attestation key, survives restarts. swtpm serves one connection at a time.
 */
import { spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { UserError } from '../errors.js';
import { pollUntil } from '../poll.js';
import { TpmClient } from './client.js';
import { canConnect, processIsAlive, runProgram } from '../process.js';

export interface SwtpmOptions {
  /** Directory of the TPM's persistent state (created when missing). swtpm.log lives here too, and the sockets by default. */
  stateDir: string;
  /** Where the two sockets go (created when missing, 0700); default `stateDir`. */
  socketDir?: string;
  /** Let swtpm outlive this process (own process group, no pipes to us). */
  detached?: boolean;
  /** PCR banks activated when the state is first manufactured. Default sha256 and sha384. */
  pcrBanks?: string[];
  /** How long to wait for the sockets, in ms. Default 10 s. */
  startTimeoutMs?: number;
  /**
   * `vm`: the TPM of a QEMU VM (QEMU's tpm emulator backend): only the control socket, over which QEMU hands swtpm
   * its data channel, and no start-up of our own (QEMU initializes the TPM at every VM reset, the firmware sends
   * TPM2_Startup). Default: the server socket too, started and ready for commands.
   */
  attach?: 'socket' | 'vm';
}

export interface SwtpmHandle {
  stateDir: string;
  serverSocket: string;
  ctrlSocket: string;
  pid: number;
  /** Shuts swtpm down through its control channel (state is saved), falling back to signals; idempotent. */
  stop(): Promise<void>;
}

export class SwtpmError extends UserError {}

/** swtpm control channel commands (swtpm's tpm_ioctl.h, socket variant). */
const CMD_INIT = 0x02;
const CMD_SHUTDOWN = 0x03;
/** A unix socket path must fit sockaddr_un.sun_path (108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH = 107;
const STATE_FILE = 'tpm2-00.permall';

export function swtpmPaths(
  stateDir: string,
  socketDir = stateDir,
): { serverSocket: string; ctrlSocket: string; logFile: string } {
  const serverSocket = path.join(path.resolve(socketDir), 'swtpm.sock');
  return { serverSocket, ctrlSocket: `${serverSocket}.ctrl`, logFile: path.join(path.resolve(stateDir), 'swtpm.log') };
}

export async function startSwtpm(options: SwtpmOptions): Promise<SwtpmHandle> {
  const stateDir = path.resolve(options.stateDir);
  const socketDir = path.resolve(options.socketDir ?? stateDir);
  const { serverSocket, ctrlSocket, logFile } = swtpmPaths(stateDir, socketDir);
  if (Buffer.byteLength(ctrlSocket) > MAX_SOCKET_PATH) {
    throw new SwtpmError(`The TPM socket folder's path is too long for a unix socket: ${socketDir}`, {
      hint: `Use a folder whose path has at most ${MAX_SOCKET_PATH - Buffer.byteLength(ctrlSocket) + Buffer.byteLength(socketDir)} bytes.`,
    });
  }
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  await fs.mkdir(socketDir, { recursive: true, mode: 0o700 });
  if (!existsSync(path.join(stateDir, STATE_FILE)))
    await manufacture(stateDir, options.pcrBanks ?? ['sha256', 'sha384']);
  if (await canConnect(ctrlSocket)) {
    throw new SwtpmError(`A swtpm is already running on ${stateDir}`, {
      hint: 'Stop it first; a TPM state has one owner.',
    });
  }
  // Stale sockets of a swtpm that was killed would make us believe the new one is ready.
  await fs.rm(serverSocket, { force: true });
  await fs.rm(ctrlSocket, { force: true });

  const vm = options.attach === 'vm';
  const args = [
    'socket',
    '--tpm2',
    '--tpmstate',
    `dir=${stateDir},mode=0600`,
    ...(vm ? [] : ['--server', `type=unixio,path=${serverSocket},mode=0600`]),
    '--ctrl',
    `type=unixio,path=${ctrlSocket},mode=0600`,
    ...(vm ? [] : ['--flags', 'not-need-init,startup-clear']),
    '--log',
    `file=${logFile},level=1,truncate`,
  ];
  const child = spawn('swtpm', args, { detached: options.detached ?? false, stdio: 'ignore' });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(-1));
  });
  if (options.detached) child.unref();
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));

  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  for (;;) {
    if (exitCode !== undefined || child.pid === undefined) {
      throw new SwtpmError(`swtpm exited before it was ready (exit code ${exitCode}).${await logTail(logFile)}`, {
        hint: 'Is another swtpm using this state directory? Is swtpm installed (npm run system-deps)?',
      });
    }
    // Both sockets accept: the server socket's file appears at bind(), before listen(), so test by connecting.
    if ((await canConnect(ctrlSocket)) && (vm || (await canConnect(serverSocket)))) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new SwtpmError(`swtpm did not open its sockets in ${stateDir} in time.${await logTail(logFile)}`);
    }
    await sleep(10);
  }
  const pid = child.pid;
  let stopped: Promise<void> | undefined;
  return {
    stateDir,
    serverSocket,
    ctrlSocket,
    pid,
    stop: () => (stopped ??= stopSwtpm({ ctrlSocket, pid, exited })),
  };
}

/**
 * Stops a swtpm: graceful shutdown through the control channel, then SIGTERM, then SIGKILL.
 * Works for a swtpm started by another process (pass its pid) as well.
 */
export async function stopSwtpm(target: { ctrlSocket: string; pid: number; exited?: Promise<unknown> }): Promise<void> {
  const { exited, pid } = target;
  // Our own child is a zombie until Node reaps it, so for it the exit event is the only truth.
  const goneWithin = exited
    ? (ms: number) => Promise.race([exited.then(() => true), sleep(ms, undefined, { ref: false }).then(() => false)])
    : (ms: number) => waitForPidExit(pid, ms);
  if (!exited && !processIsAlive(pid)) return;
  try {
    await swtpmCtrl(target.ctrlSocket, CMD_SHUTDOWN, new Uint8Array(0), 4);
  } catch {
    // the control channel is gone or stuck: fall through to signals
  }
  if (await goneWithin(3000)) return;
  signal(pid, 'SIGTERM');
  if (await goneWithin(3000)) return;
  signal(pid, 'SIGKILL');
  await goneWithin(3000);
}

/**
 * A reboot: TPM reset through the control channel (PCRs back to their reset values, transient objects gone),
 * then TPM2_Startup(CLEAR) on the server socket, or through `client` when the caller holds the connection
 * (swtpm serves one connection at a time, so a second one would wait for the first to close).
 */
export async function powerCycleSwtpm(
  ctrlSocket: string,
  options: { serverSocket?: string; client?: TpmClient } = {},
): Promise<void> {
  const res = await swtpmCtrl(ctrlSocket, CMD_INIT, u32(0), 4);
  const rc = new DataView(res.buffer, res.byteOffset).getUint32(0);
  if (rc !== 0) throw new SwtpmError(`swtpm refused the TPM reset (result 0x${rc.toString(16)})`);
  if (options.client) return options.client.startup();
  const client = await TpmClient.connect(options.serverSocket ?? ctrlSocket.replace(/\.ctrl$/, ''));
  try {
    await client.startup();
  } finally {
    client.close();
  }
}

/** Sends one control-channel command and reads a response of `responseLength` bytes. */
export function swtpmCtrl(
  ctrlSocket: string,
  command: number,
  payload: Uint8Array,
  responseLength: number,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(ctrlSocket);
    const chunks: Buffer[] = [];
    let received = 0;
    const timer = setTimeout(() => fail(new SwtpmError(`swtpm control channel ${ctrlSocket} did not answer`)), 10_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(
        err instanceof SwtpmError
          ? err
          : new SwtpmError(`swtpm control channel ${ctrlSocket}: ${err.message}`, { cause: err }),
      );
    };
    socket.on('error', fail);
    socket.on('connect', () => socket.write(Buffer.concat([u32(command), payload])));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      if (received >= responseLength) {
        clearTimeout(timer);
        socket.destroy();
        resolve(new Uint8Array(Buffer.concat(chunks).subarray(0, responseLength)));
      }
    });
    socket.on('close', () => {
      if (received < responseLength)
        fail(new SwtpmError(`swtpm control channel ${ctrlSocket} closed before answering`));
    });
  });
}

async function manufacture(stateDir: string, pcrBanks: string[]): Promise<void> {
  const args = ['--tpm2', '--tpmstate', stateDir, '--pcr-banks', pcrBanks.join(','), '--not-overwrite'];
  const { code, output } = await runProgram('swtpm_setup', args);
  if (code !== 0 || !existsSync(path.join(stateDir, STATE_FILE))) {
    throw new SwtpmError(
      `swtpm_setup could not create the TPM state in ${stateDir} (exit code ${code}): ${output.trim().slice(-500)}`,
      {
        hint: 'Install swtpm-tools (npm run system-deps) and check that the directory is writable.',
      },
    );
  }
}

async function logTail(logFile: string): Promise<string> {
  const text = await fs.readFile(logFile, 'utf8').catch(() => '');
  return text.trim() ? ` swtpm log: ${text.trim().split('\n').slice(-5).join(' | ')}` : '';
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Polls for the end of a process that is not our child; true when it ended within `ms`. */
function waitForPidExit(pid: number, ms: number): Promise<boolean> {
  return pollUntil(() => (processIsAlive(pid) ? undefined : true), {
    timeoutMs: ms,
    intervalMs: 20,
    onTimeout: () => false,
  });
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
}
