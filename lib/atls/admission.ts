/**
 * Bounding the work anyone can make an attested server do (issue 13): every call to the init, recovery and
 * verify servers costs a TPM quote on a TPM that serves one command at a time, and every join costs a
 * validation, before the caller has proven anything. Without bounds, 1,000 half-open Init streams queued 1,000
 * quotes: an honest one waited seconds. So each server admits at most `maxConcurrent` calls at once and at most
 * `maxPerPeer` from one address; a call beyond either is refused at once with RESOURCE_EXHAUSTED and a message
 * saying which limit it hit (the client retries later), and a stream that sends no message within
 * `idleTimeoutMs` is closed with DEADLINE_EXCEEDED. A slot is held from the call's start until its stream
 * closes (or the unary call answers), so the TPM queue is never longer than `maxConcurrent`.
 */
import type { ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from '../logging/index.js';

export interface ExchangeLimits {
  /** Calls the server serves at once. */
  maxConcurrent: number;
  /** Calls it serves at once from one address. */
  maxPerPeer: number;
  /** A stream that sends no message within this long is closed. */
  idleTimeoutMs: number;
}

/**
 * The init, recovery and verify servers of a node: each call costs a TPM quote (tens of milliseconds on
 * swtpm); the CLI opens one call at a time per node, a retried init a second one.
 */
export const NODE_SERVICE_LIMITS: ExchangeLimits = { maxConcurrent: 16, maxPerPeer: 4, idleTimeoutMs: 10_000 };

/**
 * The join service: a join costs a validation (well under a millisecond of cryptography); many nodes join at
 * once, and through a load balancer that does not keep the source address (the local provider's) they all
 * come from one address.
 */
export const JOIN_SERVICE_LIMITS: ExchangeLimits = { maxConcurrent: 512, maxPerPeer: 128, idleTimeoutMs: 10_000 };

/** gRPC status codes used here. */
const RESOURCE_EXHAUSTED = 8;
const DEADLINE_EXCEEDED = 4;

type Refusal = { refused: string };
type Slot = { release(): void };

/** Counts the calls in flight, in total and per peer address. */
export class ExchangeAdmission {
  private active = 0;
  private readonly perPeer = new Map<string, number>();

  constructor(
    /** Names the server in messages: "init server". */
    readonly what: string,
    readonly limits: ExchangeLimits,
  ) {}

  get inFlight(): number {
    return this.active;
  }

  /** A slot for a call from `address` (released exactly once), or why none is free. */
  admit(address: string): Slot | Refusal {
    const { maxConcurrent, maxPerPeer } = this.limits;
    const fromPeer = this.perPeer.get(address) ?? 0;
    if (fromPeer >= maxPerPeer) {
      return {
        refused: `the ${this.what} is busy: ${fromPeer} calls from ${address} are in progress, at most ${maxPerPeer} are served at once per address; try again later`,
      };
    }
    if (this.active >= maxConcurrent) {
      return {
        refused: `the ${this.what} is busy: ${this.active} calls are in progress, at most ${maxConcurrent} are served at once; try again later`,
      };
    }
    this.active++;
    this.perPeer.set(address, fromPeer + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        const left = (this.perPeer.get(address) ?? 1) - 1;
        if (left === 0) this.perPeer.delete(address);
        else this.perPeer.set(address, left);
      },
    };
  }
}

/** The address part of grpc-js's peer string ("127.0.0.1:5000", "::ffff:10.0.0.1:5000", "::1:5000"). */
export function peerAddress(peer: string): string {
  const colon = peer.lastIndexOf(':');
  const host = colon === -1 ? peer : peer.slice(0, colon);
  return host.replace(/^\[(.*)\]$/, '$1').replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1');
}

type StreamCall = {
  getPeer(): string;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  emit(event: 'error', error: { code: number; details: string }): boolean;
};
type UnaryCall = { getPeer(): string; once(event: string, listener: () => void): unknown };
type Callback = (error: { code: number; details: string } | null, value?: unknown) => void;

/** The implementation with every method admitted through `admission`; refusals and idle closes are logged (warn). */
export function admitCalls(
  service: ServiceDefinition,
  implementation: UntypedServiceImplementation,
  admission: ExchangeAdmission,
  logger: Logger,
): UntypedServiceImplementation {
  const wrapped: UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(implementation)) {
    const definition = service[name];
    wrapped[name] = (
      definition?.requestStream
        ? admitStream(handler as never, admission, logger)
        : admitUnary(handler as never, admission, logger)
    ) as never;
  }
  return wrapped;
}

function admitStream(handler: (call: StreamCall) => void, admission: ExchangeAdmission, logger: Logger) {
  return (call: StreamCall) => {
    const address = peerAddress(call.getPeer());
    const slot = admission.admit(address);
    if ('refused' in slot) {
      logger.warn(`${admission.what}: call refused`, { peer: address, reason: slot.refused });
      call.emit('error', { code: RESOURCE_EXHAUSTED, details: slot.refused });
      return;
    }
    const seconds = admission.limits.idleTimeoutMs / 1000;
    const idle = setTimeout(() => {
      const details = `the ${admission.what} closed the stream: no message arrived within ${seconds} s`;
      logger.warn(`${admission.what}: idle stream closed`, { peer: address, reason: details });
      call.emit('error', { code: DEADLINE_EXCEEDED, details });
      slot.release();
    }, admission.limits.idleTimeoutMs);
    const done = () => {
      clearTimeout(idle);
      slot.release();
    };
    for (const event of ['close', 'finish', 'cancelled', 'error']) call.once(event, done);
    // The first message clears the idle timer. Seen by wrapping the handler's own 'data' listener: a listener of
    // ours would start the stream flowing before the handler listens, and messages could pass unseen.
    const on = call.on.bind(call);
    call.on = (event: string, listener: (...args: unknown[]) => void) =>
      on(
        event,
        event === 'data'
          ? (...args: unknown[]) => {
              clearTimeout(idle);
              listener(...args);
            }
          : listener,
      );
    handler(call);
  };
}

function admitUnary(
  handler: (call: UnaryCall, callback: Callback) => void,
  admission: ExchangeAdmission,
  logger: Logger,
) {
  return (call: UnaryCall, callback: Callback) => {
    const address = peerAddress(call.getPeer());
    const slot = admission.admit(address);
    if ('refused' in slot) {
      logger.warn(`${admission.what}: call refused`, { peer: address, reason: slot.refused });
      callback({ code: RESOURCE_EXHAUSTED, details: slot.refused });
      return;
    }
    call.once('cancelled', () => slot.release());
    handler(call, (error, value) => {
      slot.release();
      callback(error, value);
    });
  };
}
