/**
 * Which of a node group's instances are the newest: the ones a scale-in removes (./apply.ts) and the one an
 * interrupted upgrade run asked for but did not record (./upgrade.ts).
 */
import type { Instance } from '../../providers/contract.js';

/**
 * Newest first, by the creation time the provider reports; by the number in the name where it reports none (the
 * local provider's records of earlier versions), which only the local provider's names carry.
 */
export function newestFirst(instances: Instance[]): Instance[] {
  const index = (name: string) => Number(name.slice(name.lastIndexOf('-') + 1));
  if (instances.every((i) => i.createdAt)) return [...instances].sort((a, b) => b.createdAt!.localeCompare(a.createdAt!) || index(b.name) - index(a.name));
  return [...instances].sort((a, b) => index(b.name) - index(a.name));
}
