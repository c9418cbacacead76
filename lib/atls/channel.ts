/**
 * One attested exchange's view of a grpc-js bidirectional stream: the aTLS steps (Challenge, Evidence,
 * Sealed, Failure, Progress) as one message union, whatever service carries them. A WireAdapter maps that
 * union to and from a service's own request/response oneofs, so init, join, rejoin and recover share one
 * implementation of the protocol. Every receive has a timeout; a Failure from the peer ends the exchange as
 * a PeerFailureError (a UserError carrying the peer's message); a closed or broken stream is a UserError too.
 */
import type { Challenge, Evidence, Failure, Progress, Sealed } from '../../proto/gen/constellation/attestation.js';
import { UserError } from '../errors.js';

export type AtlsMessage =
  | { kind: 'challenge'; value: Challenge }
  | { kind: 'evidence'; value: Evidence }
  | { kind: 'sealed'; value: Sealed }
  | { kind: 'failure'; value: Failure }
  | { kind: 'progress'; value: Progress };

/** A received message: an aTLS step, or a service message that is not one (a join hello, a recover "done"). */
export type Incoming<In> = AtlsMessage | { kind: 'other'; value: In };
export type IncomingKind = Incoming<unknown>['kind'];

/** Maps aTLS steps to one direction of a service's messages. */
export interface WireAdapter<Out, In> {
  /** The service message carrying `message`, or undefined when this direction cannot carry that kind. */
  wrap(message: AtlsMessage): Out | undefined;
  /** The aTLS step inside `message`, or undefined when it is not one. */
  unwrap(message: In): AtlsMessage | undefined;
}

/** What a grpc-js duplex stream (client or server side) offers that the channel uses. */
export interface DuplexStream<Out, In> {
  write(message: Out): unknown;
  end(): unknown;
  on(event: 'data', listener: (message: In) => void): unknown;
  on(event: 'end' | 'close' | 'cancelled', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error & { code?: number; details?: string }) => void): unknown;
}

export const DEFAULT_STEP_TIMEOUT_MS = 30_000;

export interface ChannelOptions {
  /** Names the peer in messages, e.g. "the bootstrapper at 10.0.0.1:9000". */
  peer: string;
  /** Longest wait for any one message. */
  timeoutMs?: number;
}

/** The peer sent a Failure: its message, and (for init) the node's log. */
export class PeerFailureError extends UserError {
  constructor(
    peer: string,
    readonly peerMessage: string,
    readonly log: Uint8Array,
  ) {
    super(`${capitalize(peer)} ended the exchange: ${peerMessage}`);
  }
}

export class AtlsChannel<Out, In> {
  readonly peer: string;
  readonly timeoutMs: number;
  private readonly queue: In[] = [];
  private waiter: (() => void) | undefined;
  /** Why the stream closed, made only when a receive needs it (most streams close after their last message). */
  private closedBecause: (() => UserError) | undefined;

  constructor(
    private readonly stream: DuplexStream<Out, In>,
    private readonly adapter: WireAdapter<Out, In>,
    options: ChannelOptions,
  ) {
    this.peer = options.peer;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
    stream.on('data', (message) => {
      this.queue.push(message);
      this.wake();
    });
    const closed = (reason: () => UserError) => {
      if (!this.closedBecause) {
        let error: UserError | undefined;
        this.closedBecause = () => (error ??= reason());
      }
      this.wake();
    };
    stream.on('end', () => closed(() => new UserError(`${capitalize(this.peer)} closed the connection.`)));
    stream.on('close', () => closed(() => new UserError(`The connection to ${this.peer} closed.`)));
    stream.on('cancelled', () => closed(() => new UserError(`${capitalize(this.peer)} cancelled the exchange.`)));
    stream.on('error', (err) => closed(() => streamError(this.peer, err)));
  }

  /** Whether this direction can carry a message of that kind (init and recover requests cannot carry a Failure). */
  canSend(kind: AtlsMessage['kind']): boolean {
    return this.adapter.wrap({ kind, value: {} } as AtlsMessage) !== undefined;
  }

  send(message: AtlsMessage): void {
    const wrapped = this.adapter.wrap(message);
    if (wrapped === undefined) throw new Error(`this stream cannot carry a ${message.kind} message`);
    this.stream.write(wrapped);
  }

  sendOther(message: Out): void {
    this.stream.write(message);
  }

  /**
   * The next message, which must be of one of the expected kinds. A Failure is thrown as PeerFailureError
   * (unless 'failure' is expected); anything else unexpected, a closed stream or the timeout is a UserError.
   */
  async receive<K extends IncomingKind>(
    expected: readonly K[],
    what: string,
    timeoutMs = this.timeoutMs,
  ): Promise<Extract<Incoming<In>, { kind: K }>> {
    const raw = await this.next(what, timeoutMs);
    const message: Incoming<In> = this.adapter.unwrap(raw) ?? { kind: 'other', value: raw };
    if ((expected as readonly IncomingKind[]).includes(message.kind))
      return message as Extract<Incoming<In>, { kind: K }>;
    if (message.kind === 'failure') throw new PeerFailureError(this.peer, message.value.message, message.value.log);
    throw new UserError(
      `${capitalize(this.peer)} sent an unexpected ${message.kind === 'other' ? 'message' : message.kind} while this side waited for ${what}.`,
    );
  }

  /** Ends this side of the stream (the peer sees end of stream). */
  end(): void {
    this.stream.end();
  }

  /** Sends a Failure where this direction can carry one, then ends the stream. Never throws. */
  fail(message: string, log: Uint8Array = new Uint8Array(0)): void {
    try {
      if (this.canSend('failure')) this.send({ kind: 'failure', value: { message, log: Buffer.from(log) } });
      this.stream.end();
    } catch {
      // The stream is already gone; nothing more to tell the peer.
    }
  }

  private next(what: string, timeoutMs: number): Promise<In> {
    return new Promise((resolve, reject) => {
      const settle = (): boolean => {
        const message = this.queue.shift();
        if (message !== undefined) resolve(message);
        else if (this.closedBecause) {
          const cause = this.closedBecause();
          reject(new UserError(`${cause.message} This side was waiting for ${what}.`, { cause }));
        } else return false;
        return true;
      };
      if (settle()) return;
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new UserError(`Timed out after ${timeoutMs / 1000} s waiting for ${what} from ${this.peer}.`));
      }, timeoutMs);
      this.waiter = () => {
        if (settle()) {
          clearTimeout(timer);
          this.waiter = undefined;
        }
      };
    });
  }

  private wake(): void {
    this.waiter?.();
  }
}

function streamError(peer: string, err: Error & { code?: number; details?: string }): UserError {
  // grpc status codes: 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED, 1 CANCELLED.
  if (err.code === 14) {
    return new UserError(`Could not reach ${peer}: ${err.details ?? err.message}`, {
      hint: 'Check that the address is right and the service runs, and that no firewall blocks the port.',
      cause: err,
    });
  }
  return new UserError(`The exchange with ${peer} failed: ${err.details ?? err.message}`, { cause: err });
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
