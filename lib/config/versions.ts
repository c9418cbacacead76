/** Layout version of constellation-conf.yaml (Constellation's v4 layout). */
export const CONFIG_VERSION = 'v4';

/**
 * The Kubernetes versions this release supports: the one list every other module reads.
 * Newest last; DEFAULT_KUBERNETES_VERSION is what `config generate` writes.
 */
export const SUPPORTED_KUBERNETES_VERSIONS = ['v1.31.14', 'v1.32.10', 'v1.33.6'] as const;
export type KubernetesVersion = (typeof SUPPORTED_KUBERNETES_VERSIONS)[number];
export const DEFAULT_KUBERNETES_VERSION: KubernetesVersion = 'v1.32.10';

/** Accepts "v1.32", "1.32" or an exact supported version and returns the exact supported version, or undefined. */
export function resolveKubernetesVersion(input: string): KubernetesVersion | undefined {
  const wanted = input.startsWith('v') ? input : `v${input}`;
  const exact = SUPPORTED_KUBERNETES_VERSIONS.find((v) => v === wanted);
  if (exact) return exact;
  return SUPPORTED_KUBERNETES_VERSIONS.find((v) => v.startsWith(`${wanted}.`));
}
