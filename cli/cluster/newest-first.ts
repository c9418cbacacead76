/**
 * Which of a node group's instances are the newest: the ones a scale-in removes (./apply.ts) and the one an
 * interrupted upgrade run asked for but did not record (./upgrade.ts).
 *
 * The order is total and depends only on the instances, never on the order a provider listed them in: a re-run of
 * an interrupted `apply` removes the same nodes, and a test can predict the choice. Clouds report creation times at
 * different resolutions (EC2's LaunchTime in whole seconds, so an Auto Scaling group that launches two instances at
 * once reports the same second for both; GCP and Azure in RFC 3339 with or without fractions), so times compare as
 * instants, not as strings. Instances made in the same instant are equally new; among them the tie-break is the
 * number in the name where both carry one (the local provider's `control-plane-3` is newer than `control-plane-2`),
 * then the id, greatest first.
 */
import type { Instance } from '../../providers/contract.js';

/** The number after the last `-` of a name (`control-plane-10` → 10); undefined for names without one (cloud names). */
function nameIndex(name: string): number | undefined {
  const tail = name.slice(name.lastIndexOf('-') + 1);
  return /^\d+$/.test(tail) ? Number(tail) : undefined;
}

/** The creation time as an instant (ms), or undefined when the provider reports none or something unreadable. */
function created(instance: Instance): number | undefined {
  const ms = instance.createdAt ? Date.parse(instance.createdAt) : NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

/** b before a when b is newer: by the number in the name, then by id (see the module header). */
function byNameThenId(a: Instance, b: Instance): number {
  const [ia, ib] = [nameIndex(a.name), nameIndex(b.name)];
  if (ia !== undefined && ib !== undefined && ia !== ib) return ib - ia;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/**
 * Newest first, by the creation time the provider reports; by the number in the name where some instance has none
 * (the local provider's records of earlier versions), which only the local provider's names carry. Ties: see the
 * module header.
 */
export function newestFirst(instances: Instance[]): Instance[] {
  if (instances.every((i) => created(i) !== undefined))
    return [...instances].sort((a, b) => created(b)! - created(a)! || byNameThenId(a, b));
  return [...instances].sort(byNameThenId);
}
