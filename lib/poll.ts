/**
 * One way to wait for a condition: `pollUntil` asks `check` until it answers, sleeping `intervalMs` between asks,
 * and gives up once `timeoutMs` have passed on the injected clock. Every "poll until a deadline" in the CLI, the
 * node and the local provider goes through it, so a test drives the wait on a fake clock (test/support/fake-time.ts)
 * instead of sleeping, and the deadline rule (check at least once; give up only after a check that ended past the
 * deadline, and no pause runs past the deadline) is written once.
 *
 * `check` returns the value to resolve with, or `undefined` for "not yet". An error it throws ends the wait with that
 * error; a check that should ride out failures catches them itself and returns `undefined` (keeping the last error for
 * its timeout message). At the deadline `onTimeout` decides: it throws the error the caller wants its users to read,
 * or returns a value (a partial answer); without it the wait rejects with a `PollTimeoutError`.
 */
import { type Clock, type Sleep, realSleep, systemClock } from './clock.js';

export interface PollOptions<T> {
  /** How long to keep asking, on `clock`. */
  timeoutMs: number;
  /** The pause between two checks; a function for a pause that changes (jitter, backoff), given the attempt (1-based). */
  intervalMs: number | ((attempt: number) => number);
  clock?: Clock;
  sleep?: Sleep;
  /** Aborting ends the wait (with the signal's reason between checks, an AbortError during a pause). */
  signal?: AbortSignal;
  /** What to do at the deadline: throw the caller's own error, or return a value to resolve with. */
  onTimeout?: () => T | Promise<T>;
  /** Names the condition in the default timeout error ("swtpm's sockets"). */
  what?: string;
}

/** The default error when a wait without `onTimeout` runs out of time. */
export class PollTimeoutError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}`);
    this.name = 'PollTimeoutError';
  }
}

/** Asks `check` until it returns a value other than `undefined`, or the deadline passes (see the module header). */
export async function pollUntil<T>(
  check: (attempt: number) => T | undefined | Promise<T | undefined>,
  options: PollOptions<T>,
): Promise<T> {
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? realSleep;
  const deadline = clock().getTime() + options.timeoutMs;
  for (let attempt = 1; ; attempt++) {
    options.signal?.throwIfAborted();
    const value = await check(attempt);
    if (value !== undefined) return value;
    if (clock().getTime() >= deadline) {
      if (options.onTimeout) return options.onTimeout();
      throw new PollTimeoutError(options.what ?? 'a condition', options.timeoutMs);
    }
    const pause = typeof options.intervalMs === 'function' ? options.intervalMs(attempt) : options.intervalMs;
    // Never past the deadline: the last check runs at it, not up to one pause after.
    await sleep(Math.min(pause, deadline - clock().getTime()), options.signal);
  }
}
