/**
 * Retries a cloud call that GCP throttled (429, 403 rateLimitExceeded) or could not serve (5xx, dropped
 * connection), with exponential backoff and full jitter. The compute REST transport (gaxios under gax) does not
 * retry these for mutations, so every call the provider makes goes through here; inserts are safe to repeat
 * because names are deterministic (a repeat answers "already exists", which callers treat as success).
 * Hand-written: a dozen lines, and no retry library is in the dependency set. GCP's own: the AWS and Azure SDKs
 * retry throttled calls themselves (their providers only configure the SDKs' policies). `sleep` rejects with the
 * signal's reason (not an AbortError like node:timers/promises), which is how every GCP call reports an abort.
 */
import { isRetryable } from './errors.js';

export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function withRetry<T>(
  call: () => Promise<T>,
  policy: RetryPolicy,
  options: { signal?: AbortSignal; retryable?: (err: unknown) => boolean; random?: () => number } = {},
): Promise<T> {
  const retryable = options.retryable ?? isRetryable;
  const random = options.random ?? Math.random;
  for (let attempt = 1; ; attempt++) {
    options.signal?.throwIfAborted();
    try {
      return await call();
    } catch (err) {
      if (attempt >= policy.attempts || !retryable(err)) throw err;
      const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
      await sleep(Math.round(cap * random()), options.signal);
    }
  }
}
