/**
 * Runs and controls swtpm, the software TPM 2.0 every local node owns (docs/design.md#providers).
 * One swtpm process per state directory: TPM commands on `<socketDir>/swtpm.sock`, swtpm's control protocol on
 * `<socketDir>/swtpm.sock.ctrl` (power cycle, shutdown); the socket folder is the state directory unless the caller
 * names a shorter one (a unix socket path has at most 107 bytes, a state directory in a workspace can be longer).
 * swtpm makes a new TPM (with a new endorsement seed) when the state directory has no state file, and keeps it: the
 * endorsement seed, and with it the attestation key, survives restarts. Its PCR banks are set by the swtpm that serves
 * it, at every start (see ensurePcrBanks), and by manufacture() for a VM's TPM. swtpm serves one connection at a time.
 */
import { spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { UserError } from '../errors.js';
import { pollUntil } from '../poll.js';
import { TpmClient } from './client.js';
import { canConnect, processIsAlive } from '../process.js';
import { HASH_ALGS, hashAlgName, PCR_COUNT } from './constants.js';

export interface SwtpmOptions {
  /** Directory of the TPM's persistent state (created when missing). swtpm.log lives here too, and the sockets by default. */
  stateDir: string;
  /** Where the two sockets go (created when missing, 0700); default `stateDir`. */
  socketDir?: string;
  /** Let swtpm outlive this process (own process group, no pipes to us). */
  detached?: boolean;
  /**
   * The TPM's PCR banks: allocated at every start when they differ (socket), or when the state is made (vm).
   * Default sha256 and sha384.
   */
  pcrBanks?: readonly string[];
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
/** Where manufacture() makes a VM's new TPM state before it moves it into the state directory. */
const MANUFACTURE_DIR = 'manufacture';

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
  const pcrBanks = pcrBankAlgs(options.pcrBanks ?? ['sha256', 'sha384']);
  // A VM's swtpm has no server socket (QEMU talks to it over the control socket) and leaves startup to the firmware.
  const vm = options.attach === 'vm';
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  await fs.mkdir(socketDir, { recursive: true, mode: 0o700 });
  // QEMU's firmware starts a VM's TPM, so its banks must be allocated before QEMU attaches: made apart, then moved in.
  if (vm && !existsSync(path.join(stateDir, STATE_FILE))) await manufacture(stateDir, socketDir, pcrBanks);
  if (await canConnect(ctrlSocket)) {
    throw new SwtpmError(`A swtpm is already running on ${stateDir}`, {
      hint: 'Stop it first; a TPM state has one owner.',
    });
  }
  // Stale sockets of a swtpm that was killed would make us believe the new one is ready.
  await fs.rm(serverSocket, { force: true });
  await fs.rm(ctrlSocket, { force: true });
  // A server-socket TPM is made in place (ensurePcrBanks); what a killed manufacture of an earlier version left goes.
  if (!vm) await removeManufactureLeftovers(stateDir, socketDir);

  const { pid, exited } = await runSwtpm({
    tpmStateDir: stateDir,
    ctrlSocket,
    serverSocket: vm ? undefined : serverSocket,
    logFile,
    detached: options.detached ?? false,
    startTimeoutMs: options.startTimeoutMs ?? 10_000,
  });
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= stopSwtpm({ ctrlSocket, pid, exited }));
  if (!vm) {
    try {
      await ensurePcrBanks(serverSocket, ctrlSocket, pcrBanks);
    } catch (err) {
      await stop();
      throw err instanceof SwtpmError
        ? err
        : new SwtpmError(`Could not set up the TPM in ${stateDir}: ${(err as Error).message}`, { cause: err });
    }
  }
  return { stateDir, serverSocket, ctrlSocket, pid, stop };
}

/**
 * Gets the TPM's PCR banks to exactly `algs` in the swtpm that serves it: a new TPM (or one whose first start was
 * killed before this) has libtpms's default banks. TPM2_PCR_Allocate takes effect at the next TPM reset, so the TPM is
 * shut down and reset through the control channel, which keeps this swtpm process (one spawn per start, not two).
 * Where the banks are right already (every later start) this costs one TPM2_GetCapability.
 */
async function ensurePcrBanks(serverSocket: string, ctrlSocket: string, algs: readonly number[]): Promise<void> {
  // No flush: the callers flush when they connect. The client is closed before we return: swtpm serves one
  // connection at a time, and the callers connect next.
  const client = await TpmClient.connect(serverSocket, { flushLeftovers: false });
  try {
    if (hasBanks(await client.pcrBanks(), algs)) return;
    await client.pcrAllocate([...algs]);
    await client.shutdown();
    await powerCycleSwtpm(ctrlSocket, { client });
    const banks = await client.pcrBanks();
    if (!hasBanks(banks, algs)) {
      throw new SwtpmError(
        `The TPM did not take the PCR banks ${algs.map(hashAlgName).join(', ')}: it has ${banks.map((b) => hashAlgName(b.hashAlg)).join(', ')}`,
      );
    }
  } finally {
    client.close();
  }
}

function hasBanks(banks: readonly { hashAlg: number; pcrs: readonly number[] }[], algs: readonly number[]): boolean {
  return banks.length === algs.length && banks.every((b) => algs.includes(b.hashAlg) && b.pcrs.length === PCR_COUNT);
}

function pcrBankAlgs(names: readonly string[]): number[] {
  return names.map((name) => {
    const alg = [...HASH_ALGS].find(([, info]) => info.name === name)?.[0];
    if (alg === undefined) throw new SwtpmError(`Unknown PCR bank ${name}: one of sha1, sha256, sha384, sha512.`);
    return alg;
  });
}

/** What manufacture() uses, and leaves when it is killed: its work folder and its sockets. */
function manufacturePaths(stateDir: string, socketDir: string) {
  const serverSocket = path.join(socketDir, 'mfg.sock'); // no longer than swtpm.sock: the path length was checked for that
  return { workDir: path.join(stateDir, MANUFACTURE_DIR), serverSocket, ctrlSocket: `${serverSocket}.ctrl` };
}

async function removeManufactureLeftovers(stateDir: string, socketDir: string): Promise<void> {
  const { workDir, serverSocket, ctrlSocket } = manufacturePaths(stateDir, socketDir);
  for (const file of [serverSocket, ctrlSocket]) await fs.rm(file, { force: true });
  await fs.rm(workDir, { recursive: true, force: true });
}

/**
 * Spawns swtpm on a TPM state folder and waits until its sockets accept connections; returns its PID and its exit.
 * With a server socket (TPM commands from us) the TPM is started at once (not-need-init, startup-clear); without one
 * it waits for its user (QEMU's firmware) to start it. On failure (it exited, or the sockets did not open in time)
 * nothing of it keeps running.
 */
async function runSwtpm(options: {
  tpmStateDir: string;
  ctrlSocket: string;
  serverSocket?: string;
  logFile: string;
  detached: boolean;
  startTimeoutMs: number;
}): Promise<{ pid: number; exited: Promise<number | null> }> {
  const { serverSocket, ctrlSocket } = options;
  const args = [
    'socket',
    '--tpm2',
    '--tpmstate',
    `dir=${options.tpmStateDir},mode=0600`,
    ...(serverSocket ? ['--server', `type=unixio,path=${serverSocket},mode=0600`] : []),
    '--ctrl',
    `type=unixio,path=${ctrlSocket},mode=0600`,
    ...(serverSocket ? ['--flags', 'not-need-init,startup-clear'] : []),
    '--log',
    `file=${options.logFile},level=1,truncate`,
  ];
  const waiting = new Set(serverSocket ? [ctrlSocket, serverSocket] : [ctrlSocket]);
  const child = spawn('swtpm', args, { detached: options.detached, stdio: 'ignore' });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(-1));
  });
  if (options.detached) child.unref();
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));

  const deadline = Date.now() + options.startTimeoutMs;
  for (;;) {
    if (exitCode !== undefined || child.pid === undefined) {
      throw new SwtpmError(
        `swtpm exited before it was ready (exit code ${exitCode}).${await logTail(options.logFile)}`,
        {
          hint: 'Is another swtpm using this state directory? Is swtpm installed (npm run system-deps)?',
        },
      );
    }
    // Every socket accepts: the server socket's file appears at bind(), before listen(), so test by connecting.
    // A socket that accepted once is not probed again: swtpm serves one connection at a time and its listen backlog
    // is short, so probes piling up behind the first one (while the other socket is not open yet) made the caller's
    // own connection fail with EAGAIN on a loaded machine.
    for (const socket of [...waiting]) if (await canConnect(socket)) waiting.delete(socket);
    if (waiting.size === 0) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new SwtpmError(
        `swtpm did not open its sockets in ${options.tpmStateDir} in time.${await logTail(options.logFile)}`,
      );
    }
    await sleep(10);
  }
  return { pid: child.pid, exited };
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
 * The public area of the TPM's attestation key, read through its server socket. The TPM derives the same key from
 * its endorsement seed each time, so the node re-creates exactly this one (the provider registers it for the node).
 */
export async function readAttestationKey(serverSocket: string): Promise<Uint8Array> {
  const client = await TpmClient.connect(serverSocket);
  try {
    const ak = await client.createAttestationKey();
    await client.flushContext(ak.handle);
    return ak.publicArea;
  } finally {
    client.close();
  }
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

/**
 * Makes a VM's TPM state, as `swtpm_setup --tpm2 --pcr-banks <banks>` does (without an EK certificate), in a few
 * milliseconds instead of swtpm_setup's 0.6 s (version 0.7 waits that long for the swtpm it ran to end): a swtpm on
 * a folder of its own makes a new TPM (with a new endorsement seed), gets the PCR banks allocated and shuts down, and
 * its state file is then moved into `stateDir`. A state file in `stateDir` is thus always a finished one, even when
 * this process was killed half-way: QEMU's swtpm has no server socket through which a later start could fix the banks.
 */
async function manufacture(stateDir: string, socketDir: string, algs: readonly number[]): Promise<void> {
  const { workDir, serverSocket, ctrlSocket } = manufacturePaths(stateDir, socketDir);
  const logFile = path.join(stateDir, 'swtpm.log');
  const clean = () => removeManufactureLeftovers(stateDir, socketDir);
  await clean(); // what a killed manufacture left
  await fs.mkdir(workDir, { mode: 0o700 });
  const swtpm = await runSwtpm({
    tpmStateDir: workDir,
    ctrlSocket,
    serverSocket,
    logFile,
    detached: false,
    startTimeoutMs: 10_000,
  });
  try {
    try {
      const client = await TpmClient.connect(serverSocket, { flushLeftovers: false });
      try {
        await client.pcrAllocate([...algs]);
        await client.shutdown();
      } finally {
        client.close();
      }
    } finally {
      await stopSwtpm({ ctrlSocket, pid: swtpm.pid, exited: swtpm.exited });
    }
    await fs.rename(path.join(workDir, STATE_FILE), path.join(stateDir, STATE_FILE));
  } catch (err) {
    throw new SwtpmError(`Could not create the TPM state in ${stateDir}: ${(err as Error).message}`, {
      hint: 'Check that swtpm is installed (npm run system-deps) and that the directory is writable.',
      cause: err,
    });
  } finally {
    await clean();
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
