/**
 * How TPM commands reach a TPM: one command in, one response out, in order. Two kinds exist:
 *   - a unix socket (swtpm's server socket; local process nodes and tests): responses arrive as a byte stream
 *     and are cut at the size in their header;
 *   - a character device (/dev/tpmrm0 on cloud VMs: the kernel's resource manager in front of the vTPM): a
 *     write() is one command and the next read() returns its response.
 * openTpmTransport picks by what the path is, so callers (and tests pointing at a socket or a pty) pass a path.
 */
import { promises as fs, type Stats } from 'node:fs';
import net from 'node:net';
import { UserError } from '../errors.js';

export class TpmConnectionError extends UserError {}

export interface TpmTransport {
  /** The path the transport was opened on (messages name it). */
  readonly path: string;
  /** Sends one command and resolves with the whole response. The caller sends one command at a time. */
  exchange(command: Uint8Array): Promise<Uint8Array>;
  close(): void;
}

const HEADER_SIZE = 10;
export const MAX_RESPONSE = 64 * 1024;

/** Opens the TPM at `path`: a character device, or else a unix socket. */
export async function openTpmTransport(path: string): Promise<TpmTransport> {
  let stats: Stats | undefined;
  try {
    stats = await fs.stat(path);
  } catch {
    stats = undefined; // a socket path that does not exist gets the socket's error below, with its hint
  }
  if (stats?.isCharacterDevice()) return DeviceTransport.open(path);
  return SocketTransport.connect(path);
}

/** The size field of a response header; a TpmConnectionError for a size no TPM answers. */
function responseSize(buffered: Uint8Array, path: string): number | undefined {
  if (buffered.length < HEADER_SIZE) return undefined;
  const size = Buffer.from(buffered.buffer, buffered.byteOffset, buffered.length).readUInt32BE(2);
  if (size < HEADER_SIZE || size > MAX_RESPONSE)
    throw new TpmConnectionError(`The TPM at ${path} sent a malformed response (size ${size})`);
  return size;
}

/** A unix socket to swtpm (which serves one connection at a time). */
export class SocketTransport implements TpmTransport {
  private pending: { resolve: (b: Uint8Array) => void; reject: (e: Error) => void } | undefined;
  private buffered: Buffer = Buffer.alloc(0);
  private closedError: Error | undefined;

  private constructor(
    private readonly socket: net.Socket,
    readonly path: string,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) =>
      this.onClosed(new TpmConnectionError(`TPM connection ${path}: ${err.message}`, { cause: err })),
    );
    socket.on('close', () => this.onClosed(new TpmConnectionError(`TPM connection ${path} closed`)));
  }

  static async connect(path: string): Promise<SocketTransport> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(path);
      s.once('connect', () => {
        s.removeListener('error', reject);
        resolve(s);
      });
      s.once('error', (err) =>
        reject(
          new TpmConnectionError(`Cannot connect to the TPM at ${path}: ${err.message}`, {
            cause: err,
            hint: 'Is its swtpm running?',
          }),
        ),
      );
    });
    return new SocketTransport(socket, path);
  }

  exchange(command: Uint8Array): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      if (this.closedError) return reject(this.closedError);
      this.pending = { resolve, reject };
      this.socket.write(command);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    let size: number | undefined;
    try {
      size = responseSize(this.buffered, this.path);
    } catch (err) {
      this.onClosed(err as Error);
      this.socket.destroy();
      return;
    }
    if (size === undefined || this.buffered.length < size) return;
    const response = new Uint8Array(this.buffered.subarray(0, size));
    this.buffered = this.buffered.subarray(size);
    const pending = this.pending;
    this.pending = undefined;
    pending?.resolve(response);
  }

  private onClosed(err: Error): void {
    this.closedError ??= err;
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(this.closedError);
  }
}

/**
 * A TPM character device. The kernel's driver takes one whole command per write() and returns the whole response
 * to the next read(); reads are repeated until the header's size has arrived, so a device that hands the response
 * out in pieces (a pty in tests) works too. Each read blocks one libuv pool thread only while a command runs.
 */
export class DeviceTransport implements TpmTransport {
  private closed = false;

  private constructor(
    private readonly handle: fs.FileHandle,
    readonly path: string,
  ) {}

  static async open(path: string): Promise<DeviceTransport> {
    try {
      return new DeviceTransport(await fs.open(path, 'r+'), path);
    } catch (err) {
      throw new TpmConnectionError(`Cannot open the TPM device ${path}: ${(err as Error).message}`, {
        cause: err,
        hint:
          (err as NodeJS.ErrnoException).code === 'EBUSY'
            ? 'Another program holds the TPM; use the resource manager (/dev/tpmrm0).'
            : 'Does this VM have a vTPM?',
      });
    }
  }

  async exchange(command: Uint8Array): Promise<Uint8Array> {
    if (this.closed) throw new TpmConnectionError(`TPM device ${this.path} is closed`);
    try {
      await this.handle.write(command, 0, command.length, null);
      const buffer = Buffer.alloc(MAX_RESPONSE);
      let got = 0;
      for (;;) {
        const { bytesRead } = await this.handle.read(buffer, got, buffer.length - got, null);
        if (bytesRead === 0) throw new TpmConnectionError(`The TPM device ${this.path} answered nothing`);
        got += bytesRead;
        const size = responseSize(buffer.subarray(0, got), this.path);
        if (size !== undefined && got >= size) return new Uint8Array(buffer.subarray(0, size));
      }
    } catch (err) {
      if (err instanceof TpmConnectionError) throw err;
      throw new TpmConnectionError(`TPM device ${this.path}: ${(err as Error).message}`, { cause: err });
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    void this.handle.close().catch(() => undefined);
  }
}
