/**
 * Time that passes only when the code under test sleeps: a `Clock` and a `Sleep` (lib/clock.ts) sharing one counter,
 * so a wait of minutes runs in microseconds and a test can assert how long the code waited and how often it looked.
 */
import type { Clock, Sleep } from '../../lib/clock.js';

export interface FakeTime {
  clock: Clock;
  /** Advances the clock by `ms` (after a microtask, as a real timer would) and records the pause. */
  sleep: Sleep;
  /** Milliseconds passed since the start. */
  elapsed(): number;
  /** Every pause asked for, in order. */
  slept: number[];
  /** Moves the clock forward without a sleep (time spent inside a check). */
  advance(ms: number): void;
}

export function fakeTime(start = Date.UTC(2026, 0, 1)): FakeTime {
  let now = start;
  const slept: number[] = [];
  return {
    clock: () => new Date(now),
    sleep: async (ms, signal) => {
      signal?.throwIfAborted();
      slept.push(ms);
      await Promise.resolve();
      now += ms;
    },
    elapsed: () => now - start,
    slept,
    advance: (ms) => {
      now += ms;
    },
  };
}
