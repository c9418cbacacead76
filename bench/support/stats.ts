/** Order statistics of measured times, for the benches' medians and percentiles. */

/** Rounds run before measured ones (JIT, caches of the runtime). */
export const WARM_UP_ROUNDS = 20;

/** The value at fraction `p` (0..1) of the ascending `sorted`. */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}
