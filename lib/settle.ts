/** Waiting for several operations that must all end, whatever happens to one of them. */

/**
 * Like Promise.all, but waits for every operation to end before rejecting with the first error, so nothing keeps
 * running in the background after a failure (a command's workspace lock is released only when it returns).
 */
export async function settleAll<T extends readonly unknown[]>(
  promises: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}
