/**
 * What a cloud fake answered on purpose the way its cloud does at times, counted per kind: an eventual-consistency
 * `*.NotFound` from EC2, GCP's `resourceNotReady`, throttling (429, 503), an instance still PROVISIONING, an Azure VM
 * still Creating. A test that claims its providers ride these out asserts that they were returned, not only configured
 * (docs/cloud-in-a-box.md): a fault that never reaches the calls it is meant for proves nothing.
 */
export type InjectedCounts = Record<string, number>;

export class InjectedErrors {
  private readonly counts = new Map<string, number>();

  /** The fake answered one request with `kind`. */
  hit(kind: string): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  /** Every kind returned so far, with how often. */
  snapshot(): InjectedCounts {
    return Object.fromEntries([...this.counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** What was returned after `earlier` (a snapshot), kinds not returned since left out. */
  since(earlier: InjectedCounts): InjectedCounts {
    return Object.fromEntries(
      Object.entries(this.snapshot())
        .map(([kind, n]) => [kind, n - (earlier[kind] ?? 0)] as const)
        .filter(([, n]) => n > 0),
    );
  }

  reset(): void {
    this.counts.clear();
  }
}

/** "kind ×n, kind ×n" (or "nothing"), for messages. */
export function formatInjected(counts: InjectedCounts): string {
  const parts = Object.entries(counts).map(([kind, n]) => `${kind} ×${n}`);
  return parts.length ? parts.join(', ') : 'nothing';
}
