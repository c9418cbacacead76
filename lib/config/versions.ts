import { UserError } from '../errors.js';

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

/**
 * Whether the cluster's Kubernetes may go from `current` to `target` in place, by kubeadm's rules
 * (kubeadm upgrade apply's version policy): no downgrade, and at most one minor version per upgrade. Returns
 * what kind of step it is; a refusal is a UserError naming both versions.
 */
export function checkKubernetesUpgrade(current: string, target: string): 'same' | 'patch' | 'minor' {
  const from = parseKubernetesVersion(current);
  const to = parseKubernetesVersion(target);
  const order = to.major - from.major || to.minor - from.minor || to.patch - from.patch;
  if (order === 0) return 'same';
  if (order < 0) {
    throw new UserError(
      `Kubernetes cannot go from ${from.text} down to ${to.text}: kubeadm does not downgrade a cluster.`,
      {
        hint: `Set kubernetesVersion in constellation-conf.yaml to ${from.text} or newer.`,
      },
    );
  }
  if (to.major !== from.major || to.minor > from.minor + 1) {
    throw new UserError(
      `Kubernetes cannot go from ${from.text} to ${to.text} in one upgrade: kubeadm upgrades one minor version at a time.`,
      {
        hint: `Upgrade to v${from.major}.${from.minor + 1} first (set kubernetesVersion in constellation-conf.yaml), then to ${to.text}.`,
      },
    );
  }
  return to.minor === from.minor ? 'patch' : 'minor';
}

/** "v1.32.10" or "1.32.10" (a pre-release or build suffix is ignored for ordering). */
function parseKubernetesVersion(version: string): { major: number; minor: number; patch: number; text: string } {
  const match = /^v?(\d+)\.(\d+)\.(\d+)([-+][0-9A-Za-z.-]+)?$/.exec(version.trim());
  if (!match) throw new UserError(`"${version}" is not a Kubernetes version (vMAJOR.MINOR.PATCH).`);
  return {
    major: Number(match[1]),
    minor: Number(match[2]),
    patch: Number(match[3]),
    text: `v${match[1]}.${match[2]}.${match[3]}${match[4] ?? ''}`,
  };
}
