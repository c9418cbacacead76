/**
 * Time as a collaborator: code that reads the time or waits takes these as parameters, so tests can run it on a
 * fake clock (certificate validity, token expiry, retry backoff) without waiting.
 */
import { setTimeout as timersSleep } from 'node:timers/promises';

/** The current time. */
export type Clock = () => Date;

/** Waits `ms`; rejects (with an AbortError) when `signal` aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export const systemClock: Clock = () => new Date();

export const realSleep: Sleep = async (ms, signal) => {
  await timersSleep(ms, undefined, { signal });
};
